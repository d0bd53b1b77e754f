// A job's optional columns (ordering key, metadata, tags), each a value or NULL, into
// either a batch array (Sink = ArrayLiteral: the INSERT paths) or a statement parameter
// (Sink = pg::Params: the one-job and the unique-job statements). Internal.
#pragma once

#include <string_view>
#include <type_traits>
#include <utility>

#include "awa/job.hpp"
#include "pg/params.hpp"
#include "storage/job_metadata.hpp"
#include "storage/pg_array.hpp"

namespace awa::storage {

// pg::Params says null(), ArrayLiteral add_null().
template <class Sink>
void add_sql_null(Sink& s) {
  if constexpr (std::is_same_v<Sink, pg::Params>) {
    s.null();
  } else {
    s.add_null();
  }
}

template <class Sink>
void add_ordering_key(Sink& s, const NewJob& j) {
  if (j.opts.ordering_key) {
    s.add_bytea(std::string_view(*j.opts.ordering_key));
  } else {
    add_sql_null(s);
  }
}

template <class Sink>
void add_metadata(Sink& s, const NewJob& j) {
  if (auto text = metadata_text(j)) {
    s.add(std::move(*text));
  } else {
    add_sql_null(s);
  }
}

template <class Sink>
void add_tags(Sink& s, const NewJob& j) {
  if (j.opts.tags.empty()) {
    add_sql_null(s);
  } else {
    ArrayLiteral literal;
    for (const auto& t : j.opts.tags) literal.add(t);
    s.add(std::move(literal).finish());
  }
}

// The three in the order of the batch columns and of the one-job statement ($8, $9, $10).
template <class Sink>
void add_optional_columns(const NewJob& j, Sink& keys, Sink& meta, Sink& tags) {
  add_ordering_key(keys, j);
  add_metadata(meta, j);
  add_tags(tags, j);
}

}  // namespace awa::storage
