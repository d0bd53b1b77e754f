// The version of this build's SQL function set (sql/functions/ and
// sql/security/function_settings.sql), recorded in the schema when the migrator installs it.
//
// Functions change in place (CREATE OR REPLACE), so, unlike migrations, nothing in their
// text says which build is newer. The catalogue number does: a build never replaces the
// functions of a schema that records a higher number, so a rolled-back or not yet upgraded
// binary cannot reinstall its older functions over a newer set (docs/upgrading.md).
//
// Rules for changing a function file:
// - Bump kFunctionCatalogue in the same commit. tests/unit/sql_catalog_test.cpp pins a
//   hash of the function files to the number and prints the new hash to paste when they
//   differ.
// - Keep the previous catalogue's callers working (expand / flip / contract): add a
//   parameter with a default or a new function first, move the C++ callers in the next
//   catalogue, remove the old form one catalogue later. A build runs against the newer
//   functions of the next catalogue without reinstalling them.
// - When a change cannot stay compatible (the contract step removes what an older build
//   still calls), raise kOldestCompatibleCatalogue to the oldest catalogue whose callers
//   still work. A build below the number a schema records refuses to migrate it.
#pragma once

namespace awa::schema {

inline constexpr int kFunctionCatalogue = 8;

// The oldest catalogue whose binaries may run against this build's functions. 5: the
// functions of catalogue 5 read and write the queue ids of migration 0018, whose tables
// no build of an older catalogue can write.
inline constexpr int kOldestCompatibleCatalogue = 5;

static_assert(kOldestCompatibleCatalogue <= kFunctionCatalogue);

}  // namespace awa::schema
