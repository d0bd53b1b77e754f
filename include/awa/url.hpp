// Keeps passwords in connection strings out of logs, error messages and help text — for
// programs (the `awa` CLI among them) that print messages which may quote a URL.
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>

namespace awa {

inline constexpr std::string_view kRedacted = "***";

// `conninfo` with every password replaced by "***", in either form libpq accepts:
//   postgresql://user:secret@host/db          -> postgresql://user:***@host/db
//   postgres://host/db?password=secret&x=y    -> postgres://host/db?password=***&x=y
//   host=h password=secret user=u             -> host=h password=*** user=u
//   password='it''s \' secret'                -> password=***
// Everything else is kept as written, so the result still says where it points.
std::string redact_url(std::string_view conninfo);

// `text` made safe to print: every postgres:// or postgresql:// URI in it and every
// password=VALUE masked as redact_url() does, and the password of `conninfo` (as libpq
// decodes it, and as written in the string) replaced by "***" wherever it appears — for
// messages that might quote either, e.g. an error from a library that echoes its input.
// `conninfo` may be empty (then only the first part applies).
std::string scrub_password(std::string text, std::string_view conninfo);

}  // namespace awa
