// UTF-8 as PostgreSQL's text type takes it (a UTF-8 database: well-formed, no NUL).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace awa::storage {

// The length of the well-formed UTF-8 sequence at text[i] (i < text.size()), or 0 when
// none starts there (RFC 3629, table 3-7 of the Unicode standard: no overlong forms, no
// surrogates, nothing above U+10FFFF). A NUL byte is a well-formed 1-byte sequence.
std::size_t utf8_sequence(std::string_view text, std::size_t i);

// The byte offset of the first byte that does not start a well-formed UTF-8 sequence,
// or nullopt.
std::optional<std::size_t> invalid_utf8_at(std::string_view text);

// `text` with every byte that does not start a well-formed UTF-8 sequence, and every
// NUL, replaced by U+FFFD, cut at a character boundary to at most `max_bytes` bytes (an
// ellipsis marks a cut). Handler error messages go through this: they are free text from
// arbitrary code, and one the server rejects (SQLSTATE 22021) would fail a whole flush.
std::string storable_text(std::string_view text, std::size_t max_bytes);

}  // namespace awa::storage
