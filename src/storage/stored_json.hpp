// Decoding JSON as PostgreSQL stores it (jsonb) into nlohmann::json, for values written by
// any producer: SQL (insert_job_compat), other languages' clients, operators. jsonb holds
// what nlohmann::json cannot: numbers beyond a double's range (1e400, kept as numeric) and
// nesting as deep as the server's stack allows (about 10,000 levels of arrays at the
// default max_stack_depth). Every caller that decodes a stored value after a claim, or to
// display it, goes through here: a value that does not decode is reported, never thrown.
//
// Thread safety: free functions without state.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace awa::storage {

// Decodes `text` into `out`. Returns "" when it did; otherwise why not, as a phrase for
// "<field> could not be decoded: <why>" (a number beyond a double's range; nesting deeper
// than kMaxDecodedJsonDepth, refused before parsing; text that is not JSON), and leaves
// `out` null. Throws nothing but std::bad_alloc.
std::string decode_stored_json(std::string_view text, nlohmann::json& out);

// Whether `text` is one JSON document (RFC 8259), as jsonb takes it: what
// nlohmann::json::accept takes, and also numbers beyond a double's range, which accept
// refuses although they are JSON. The producers' check of args given as text.
bool is_json_text(std::string_view text);

}  // namespace awa::storage
