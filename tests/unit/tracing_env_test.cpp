// trace::ExportOptions::from_env (include/awa/tracing.hpp): the OpenTelemetry SDK's
// standard environment variables — when they turn tracing on or off, where spans go, the
// headers, the resource, the sampler and the batch settings — and the values it refuses,
// naming the variable; and what a span does with tracing off. No database, no collector.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <optional>
#include <string>

#include "awa/error.hpp"
#include "awa/trace.hpp"
#include "awa/tracing.hpp"

namespace awa::trace {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;

// Every variable from_env reads.
constexpr const char* kVariables[] = {
    "OTEL_SDK_DISABLED",
    "OTEL_TRACES_EXPORTER",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
    "OTEL_EXPORTER_OTLP_HEADERS",
    "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
    "OTEL_SERVICE_NAME",
    "OTEL_RESOURCE_ATTRIBUTES",
    "OTEL_TRACES_SAMPLER",
    "OTEL_TRACES_SAMPLER_ARG",
    "OTEL_BSP_MAX_QUEUE_SIZE",
    "OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
    "OTEL_BSP_SCHEDULE_DELAY",
    "OTEL_EXPORTER_OTLP_TIMEOUT",
    "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
};

class TracingEnvTest : public ::testing::Test {
 protected:
  // Each test starts from none of the variables, whatever the environment running the
  // tests sets, and leaves that environment as it found it.
  void SetUp() override {
    for (const char* name : kVariables) {
      const char* value = std::getenv(name);
      saved_[name] = value ? std::optional<std::string>(value) : std::nullopt;
      ::unsetenv(name);
    }
  }
  void TearDown() override {
    for (const auto& [name, value] : saved_) {
      if (value) {
        ::setenv(name.c_str(), value->c_str(), 1);
      } else {
        ::unsetenv(name.c_str());
      }
    }
  }

  static void set(const char* name, const std::string& value) { ::setenv(name, value.c_str(), 1); }
  // Tracing on (an endpoint), for the tests of the other settings.
  static void with_endpoint() { set("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"); }

  // from_env's InvalidArgument's text; a failure when it does not throw one.
  static std::string refusal() {
    try {
      ExportOptions::from_env();
    } catch (const InvalidArgument& e) {
      return e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "not an InvalidArgument: " << e.what();
      return e.what();
    }
    ADD_FAILURE() << "from_env accepted it";
    return "";
  }

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

TEST_F(TracingEnvTest, NothingSetLeavesTracingOffWithTheSdkDefaults) {
  const auto o = ExportOptions::from_env();
  EXPECT_FALSE(o.enabled);
  EXPECT_EQ(o.endpoint, "http://localhost:4318/v1/traces");
  EXPECT_TRUE(o.headers.empty());
  EXPECT_EQ(o.service_name, "unknown_service:awa");
  EXPECT_TRUE(o.resource_attributes.empty());
  EXPECT_EQ(o.sampler, Sampler::kParentBasedAlwaysOn);
  EXPECT_EQ(o.sampler_ratio, 1.0);
  EXPECT_EQ(o.max_queue, 2048U);
  EXPECT_EQ(o.max_batch, 512U);
  EXPECT_EQ(o.schedule_delay, milliseconds(5000));
  EXPECT_EQ(o.timeout, milliseconds(10000));
}

TEST_F(TracingEnvTest, ABaseEndpointGetsTheTracesPathAndTurnsTracingOn) {
  set("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318");
  auto o = ExportOptions::from_env();
  EXPECT_TRUE(o.enabled);
  EXPECT_EQ(o.endpoint, "http://collector:4318/v1/traces");

  set("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/");
  EXPECT_EQ(ExportOptions::from_env().endpoint, "http://collector:4318/v1/traces")
      << "no double slash";

  // A gateway's path prefix is kept.
  set("OTEL_EXPORTER_OTLP_ENDPOINT", "http://gateway:8080/otlp");
  EXPECT_EQ(ExportOptions::from_env().endpoint, "http://gateway:8080/otlp/v1/traces");
}

TEST_F(TracingEnvTest, TheTracesEndpointIsUsedAsGivenAndWinsOverTheBaseOne) {
  set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://collector:4318/custom/spans");
  auto o = ExportOptions::from_env();
  EXPECT_TRUE(o.enabled);
  EXPECT_EQ(o.endpoint, "http://collector:4318/custom/spans");

  set("OTEL_EXPORTER_OTLP_ENDPOINT", "http://other:4318");
  EXPECT_EQ(ExportOptions::from_env().endpoint, "http://collector:4318/custom/spans");
}

TEST_F(TracingEnvTest, AnOtlpExporterAloneExportsToTheDefaultEndpoint) {
  set("OTEL_TRACES_EXPORTER", "otlp");
  const auto o = ExportOptions::from_env();
  EXPECT_TRUE(o.enabled);
  EXPECT_EQ(o.endpoint, "http://localhost:4318/v1/traces");
}

TEST_F(TracingEnvTest, ExporterNoneOrADisabledSdkTurnsTracingOffEvenWithAnEndpoint) {
  with_endpoint();
  set("OTEL_TRACES_EXPORTER", "none");
  EXPECT_FALSE(ExportOptions::from_env().enabled);

  ::unsetenv("OTEL_TRACES_EXPORTER");
  set("OTEL_SDK_DISABLED", "true");
  EXPECT_FALSE(ExportOptions::from_env().enabled);

  set("OTEL_SDK_DISABLED", "false");
  EXPECT_TRUE(ExportOptions::from_env().enabled);
}

TEST_F(TracingEnvTest, OnlyTheHttpJsonProtocolIsAccepted) {
  with_endpoint();
  set("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json");
  set("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json");
  EXPECT_TRUE(ExportOptions::from_env().enabled);

  ::unsetenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL");
  set("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc");
  EXPECT_THAT(refusal(), HasSubstr("OTEL_EXPORTER_OTLP_PROTOCOL"));

  ::unsetenv("OTEL_EXPORTER_OTLP_PROTOCOL");
  set("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf");
  EXPECT_THAT(refusal(), HasSubstr("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"));
}

TEST_F(TracingEnvTest, AnEndpointThatIsNotPlainHttpIsRefused) {
  set("OTEL_EXPORTER_OTLP_ENDPOINT", "https://collector:4318");
  EXPECT_THAT(refusal(), HasSubstr("OTEL_EXPORTER_OTLP_ENDPOINT"));

  ::unsetenv("OTEL_EXPORTER_OTLP_ENDPOINT");
  set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "https://collector:4318/v1/traces");
  EXPECT_THAT(refusal(), HasSubstr("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"));
}

TEST_F(TracingEnvTest, HeadersArePercentDecodedAndTrimmed) {
  with_endpoint();
  set("OTEL_EXPORTER_OTLP_HEADERS", " api-key = abc123 , x-team=a%20b%2Cc");
  EXPECT_EQ(ExportOptions::from_env().headers,
            (std::map<std::string, std::string>{{"api-key", "abc123"}, {"x-team", "a b,c"}}));

  // The traces-only variable: its value of a header wins.
  set("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "api-key=traces-key");
  const auto headers = ExportOptions::from_env().headers;
  ASSERT_EQ(headers.count("api-key"), 1U);
  EXPECT_EQ(headers.at("api-key"), "traces-key");
}

TEST_F(TracingEnvTest, TheServiceNameIsOtelServiceNamesElseTheResourceAttributes) {
  with_endpoint();
  set("OTEL_RESOURCE_ATTRIBUTES",
      "service.name=from-resource,deployment.environment=prod,"
      "team=a%20b");
  auto o = ExportOptions::from_env();
  EXPECT_EQ(o.service_name, "from-resource");
  ASSERT_EQ(o.resource_attributes.count("deployment.environment"), 1U);
  EXPECT_EQ(o.resource_attributes.at("deployment.environment"), "prod");
  ASSERT_EQ(o.resource_attributes.count("team"), 1U);
  EXPECT_EQ(o.resource_attributes.at("team"), "a b");

  set("OTEL_SERVICE_NAME", "checkout");
  o = ExportOptions::from_env();
  EXPECT_EQ(o.service_name, "checkout");
  EXPECT_EQ(o.resource_attributes.count("deployment.environment"), 1U);
}

TEST_F(TracingEnvTest, EverySamplerNameGivesItsSampler) {
  with_endpoint();
  const std::map<std::string, Sampler> names = {
      {"always_on", Sampler::kAlwaysOn},
      {"always_off", Sampler::kAlwaysOff},
      {"traceidratio", Sampler::kTraceIdRatio},
      {"parentbased_always_on", Sampler::kParentBasedAlwaysOn},
      {"parentbased_always_off", Sampler::kParentBasedAlwaysOff},
      {"parentbased_traceidratio", Sampler::kParentBasedTraceIdRatio},
  };
  for (const auto& [name, sampler] : names) {
    set("OTEL_TRACES_SAMPLER", name);
    EXPECT_EQ(ExportOptions::from_env().sampler, sampler) << name;
  }

  set("OTEL_TRACES_SAMPLER", "traceidratio");
  set("OTEL_TRACES_SAMPLER_ARG", "0.25");
  EXPECT_EQ(ExportOptions::from_env().sampler_ratio, 0.25);
  set("OTEL_TRACES_SAMPLER", "parentbased_traceidratio");
  set("OTEL_TRACES_SAMPLER_ARG", "0");
  EXPECT_EQ(ExportOptions::from_env().sampler_ratio, 0.0);
  set("OTEL_TRACES_SAMPLER_ARG", "1");
  EXPECT_EQ(ExportOptions::from_env().sampler_ratio, 1.0);
}

TEST_F(TracingEnvTest, AnUnknownSamplerOrARatioOutsideZeroToOneIsRefused) {
  with_endpoint();
  set("OTEL_TRACES_SAMPLER", "sometimes");
  EXPECT_THAT(refusal(), HasSubstr("OTEL_TRACES_SAMPLER"));

  set("OTEL_TRACES_SAMPLER", "traceidratio");
  for (const char* bad : {"1.5", "-0.1", "half", "0.5x"}) {
    set("OTEL_TRACES_SAMPLER_ARG", bad);
    EXPECT_THAT(refusal(), HasSubstr("OTEL_TRACES_SAMPLER_ARG")) << bad;
  }
}

TEST_F(TracingEnvTest, TheBatchAndTimeoutSettingsAreRead) {
  with_endpoint();
  set("OTEL_BSP_MAX_QUEUE_SIZE", "100");
  set("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "10");
  set("OTEL_BSP_SCHEDULE_DELAY", "250");
  set("OTEL_EXPORTER_OTLP_TIMEOUT", "3000");
  auto o = ExportOptions::from_env();
  EXPECT_EQ(o.max_queue, 100U);
  EXPECT_EQ(o.max_batch, 10U);
  EXPECT_EQ(o.schedule_delay, milliseconds(250));
  EXPECT_EQ(o.timeout, milliseconds(3000));

  set("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "1500");
  EXPECT_EQ(ExportOptions::from_env().timeout, milliseconds(1500)) << "the traces-only one wins";
}

TEST_F(TracingEnvTest, AMalformedNumberIsRefusedNamingItsVariable) {
  with_endpoint();
  for (const char* name :
       {"OTEL_BSP_MAX_QUEUE_SIZE", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "OTEL_BSP_SCHEDULE_DELAY",
        "OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT"}) {
    for (const char* bad : {"ten", "12abc"}) {
      set(name, bad);
      EXPECT_THAT(refusal(), HasSubstr(name)) << name << "=" << bad;
    }
    ::unsetenv(name);
  }
}

// With no client tracing in the process (none runs in this binary), a span records
// nothing and passes the thread's context through untouched.
TEST(TracingSpanTest, WithoutTracingASpanRecordsNothingAndLeavesTheContextAlone) {
  {
    auto root = Span::root("GET /");
    EXPECT_FALSE(root.recording());
    EXPECT_FALSE(root.context().has_value());
    EXPECT_EQ(current(), nullptr);
    root.set_attribute("k", "v");
    root.add_event("e");
    root.set_error("nothing records it");
  }
  const auto parent = parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
  Scope scope(parent);
  {
    Span child("work");
    EXPECT_FALSE(child.recording());
    EXPECT_EQ(child.context(), parent) << "the context current when it began";
    ASSERT_NE(current(), nullptr);
    EXPECT_EQ(*current(), parent);
  }
  ASSERT_NE(current(), nullptr);
  EXPECT_EQ(*current(), parent);
}

}  // namespace
}  // namespace awa::trace
