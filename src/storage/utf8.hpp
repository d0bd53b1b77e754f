// Text that PostgreSQL will accept in a `text` column of a UTF-8 database.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace awa::storage {

// Whether `s` is well-formed UTF-8 (no overlong forms, no surrogates, nothing above
// U+10FFFF) without NUL bytes: exactly what the server accepts as text.
bool is_storable_text(std::string_view s);

// `s` with every byte that is not part of a well-formed UTF-8 sequence, and every NUL,
// replaced by U+FFFD, cut at a character boundary to at most `max_bytes` bytes (an
// ellipsis marks a cut). Handler error messages go through this: they are free text from
// arbitrary code, and one the server rejects (SQLSTATE 22021) would fail a whole flush.
std::string storable_text(std::string_view s, std::size_t max_bytes);

}  // namespace awa::storage
