#include <gtest/gtest.h>

#include "awa/error.hpp"
#include "schema/migrator.hpp"
#include "schema/sql_catalog.hpp"

namespace awa {
namespace {

TEST(SqlCatalogTest, MigrationsAreEmbeddedInStrictVersionOrder) {
  const auto migrations = schema::embedded_migrations();
  ASSERT_FALSE(migrations.empty());
  EXPECT_EQ(migrations.front().version, 1);
  EXPECT_EQ(migrations.front().name, "0001_queue_storage.sql");
  for (std::size_t i = 1; i < migrations.size(); ++i) {
    EXPECT_LT(migrations[i - 1].version, migrations[i].version);
  }
}

TEST(SqlCatalogTest, ChecksumChangesWithAnyByte) {
  EXPECT_EQ(schema::checksum("CREATE TABLE t ()"), schema::checksum("CREATE TABLE t ()"));
  EXPECT_NE(schema::checksum("CREATE TABLE t ()"), schema::checksum("CREATE TABLE t ( )"));
  EXPECT_EQ(schema::checksum("").size(), 16U);
}

TEST(SqlCatalogTest, RenderReplacesEverySchemaToken) {
  EXPECT_EQ(sql::render("SELECT * FROM {schema}.a JOIN {schema}.b", "\"s1\""),
            "SELECT * FROM \"s1\".a JOIN \"s1\".b");
  EXPECT_EQ(sql::render("no token", "\"s\""), "no token");
}

TEST(SqlCatalogTest, UnknownFileIsAnError) {
  EXPECT_THROW(sql::file("queries/does_not_exist.sql"), Error);
  EXPECT_FALSE(sql::file("queries/enqueue/insert_lane.sql").empty());
}

TEST(SqlCatalogTest, SchemaNamesAreValidatedAndQuoted) {
  EXPECT_EQ(sql::quote_schema("awa"), "\"awa\"");
  EXPECT_EQ(sql::quote_schema("Tenant_7"), "\"Tenant_7\"");
  for (const char* bad : {"", "7abc", "a-b", "a b", "a\"b", "a;drop", "x.y"}) {
    EXPECT_THROW(sql::quote_schema(bad), InvalidArgument) << bad;
  }
  EXPECT_THROW(sql::quote_schema(std::string(64, 'a')), InvalidArgument);
  EXPECT_NO_THROW(sql::quote_schema(std::string(63, 'a')));
}

}  // namespace
}  // namespace awa
