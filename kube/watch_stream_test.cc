#include "kube/watch_stream.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "base/base64.h"
#include "kube/api_status.h"

namespace rackgate::kube {
namespace {

using json = nlohmann::json;

json CsrObject(const std::string& name, const std::string& rv) {
  return {{"kind", "CertificateSigningRequest"},
          {"apiVersion", "certificates.k8s.io/v1"},
          {"metadata", {{"name", name}, {"uid", "u-" + name}, {"resourceVersion", rv},
                        {"creationTimestamp", "2026-11-28T01:02:03Z"}}},
          {"spec", {{"request", base64::Encode("PEM")}, {"signerName", "kubernetes.io/kubelet-serving"}}}};
}

std::string Line(const std::string& type, const json& object) {
  return json{{"type", type}, {"object", object}}.dump() + "\n";
}

std::string Bookmark(const std::string& rv) {
  return Line("BOOKMARK", {{"kind", "CertificateSigningRequest"}, {"metadata", {{"resourceVersion", rv}}}});
}

std::string Gone() {
  return Line("ERROR", {{"kind", "Status"}, {"apiVersion", "v1"}, {"status", "Failure"},
                        {"message", "too old resource version: 1 (3000)"}, {"reason", "Expired"}, {"code", 410}});
}

std::vector<std::string> Lines(const std::string& stream, size_t chunk, size_t max_line, Status* status) {
  LineSplitter splitter(max_line);
  std::vector<std::string> out;
  for (size_t i = 0; i < stream.size(); i += chunk) {
    *status = splitter.Feed(std::string_view(stream).substr(i, chunk), [&out](std::string_view line) {
      out.emplace_back(line);
      return true;
    });
    if (!status->ok()) break;
  }
  return out;
}

TEST(LineSplitter, AnyChunking) {
  const std::string stream = "one\ntwo\r\n\nthree-is-longer\nfour\n";
  for (size_t chunk = 1; chunk <= stream.size(); ++chunk) {
    Status s;
    EXPECT_EQ(Lines(stream, chunk, 64, &s), (std::vector<std::string>{"one", "two", "three-is-longer", "four"}))
        << chunk;
    EXPECT_TRUE(s.ok());
  }
}

TEST(LineSplitter, KeepsAnUnfinishedLine) {
  LineSplitter splitter(64);
  std::vector<std::string> out;
  auto keep = [&out](std::string_view l) {
    out.emplace_back(l);
    return true;
  };
  ASSERT_TRUE(splitter.Feed("a\nbc", keep).ok());
  EXPECT_EQ(splitter.pending(), 2u);
  ASSERT_TRUE(splitter.Feed("d\n", keep).ok());
  EXPECT_EQ(out, (std::vector<std::string>{"a", "bcd"}));
  EXPECT_EQ(splitter.pending(), 0u);
}

TEST(LineSplitter, OversizeLineFailsAsSoonAsItIs) {
  for (size_t chunk : {1u, 3u, 7u, 100u}) {
    Status s;
    // A line of exactly the limit passes; one byte more fails, also before
    // its newline arrives.
    const std::vector<std::string> lines = Lines("12345678\n123456789", chunk, 8, &s);
    EXPECT_EQ(lines, std::vector<std::string>{"12345678"});
    EXPECT_EQ(s.reason(), "kube_event_too_large") << chunk;
  }
}

TEST(LineSplitter, HandlerEndsIt) {
  LineSplitter splitter(64);
  int calls = 0;
  ASSERT_TRUE(splitter.Feed("a\nb\nc\n", [&calls](std::string_view) { return ++calls < 2; }).ok());
  EXPECT_EQ(calls, 2);
}

struct Recorder {
  std::vector<WatchEvent> events;
  bool go_on = true;
  WatchHandler Handler() {
    return [this](const WatchEvent& ev) {
      events.push_back(ev);
      return go_on;
    };
  }
};

TEST(WatchStream, EventsAcrossEveryChunkBoundary) {
  json invalid = CsrObject("bad/name", "12");
  const std::string stream = Line("ADDED", CsrObject("csr-a", "10")) + Line("MODIFIED", CsrObject("csr-a", "11")) +
                             Bookmark("11") + Line("ADDED", invalid) + Line("DELETED", CsrObject("csr-a", "13"));
  for (size_t chunk = 1; chunk <= stream.size(); chunk += (chunk < 40 ? 1 : 37)) {
    Recorder r;
    WatchStream ws(1 << 20, r.Handler());
    for (size_t i = 0; i < stream.size(); i += chunk) {
      ASSERT_TRUE(ws.Feed(std::string_view(stream).substr(i, chunk))) << chunk;
    }
    ASSERT_TRUE(ws.status().ok());
    ASSERT_EQ(r.events.size(), 5u) << chunk;
    EXPECT_EQ(r.events[0].type, WatchEvent::Type::kAdded);
    EXPECT_EQ(r.events[0].object.name, "csr-a");
    EXPECT_EQ(r.events[0].resource_version, "10");
    EXPECT_EQ(r.events[1].type, WatchEvent::Type::kModified);
    EXPECT_EQ(r.events[2].type, WatchEvent::Type::kBookmark);
    EXPECT_EQ(r.events[2].resource_version, "11");
    // An object that fails the checks is still an event (its RV counts).
    EXPECT_EQ(r.events[3].object_status.reason(), "kube_csr_invalid");
    EXPECT_EQ(r.events[3].resource_version, "12");
    EXPECT_EQ(r.events[4].type, WatchEvent::Type::kDeleted);
  }
}

TEST(WatchStream, ErrorGoneEndsTheWatch) {
  Recorder r;
  WatchStream ws(1 << 20, r.Handler());
  const std::string stream = Line("ADDED", CsrObject("csr-a", "10")) + Gone() + Line("ADDED", CsrObject("b", "11"));
  EXPECT_FALSE(ws.Feed(stream));
  EXPECT_EQ(ws.status().reason(), "kube_gone");
  EXPECT_NE(ws.status().message().find("too old resource version"), std::string::npos);
  EXPECT_EQ(r.events.size(), 1u);  // the ERROR is not handed on; nothing after it is read
  EXPECT_FALSE(ws.Feed(Line("ADDED", CsrObject("c", "12"))));
}

TEST(WatchStream, OtherErrorsMapLikeHttp) {
  Recorder r;
  WatchStream ws(1 << 20, r.Handler());
  EXPECT_FALSE(ws.Feed(Line("ERROR", {{"kind", "Status"}, {"code", 500}, {"message", "etcd\x1b[31m down"}})));
  EXPECT_EQ(ws.status().reason(), "kube_unavailable");
  EXPECT_EQ(ws.status().message().find('\x1b'), std::string::npos) << ws.status().message();
}

TEST(WatchStream, OversizeEvent) {
  Recorder r;
  const std::string big = Line("ADDED", CsrObject("csr-a", "10"));
  WatchStream ws(big.size() - 2, r.Handler());  // the line without its "\n" is one byte too long
  bool running = true;
  for (char c : big) running = running && ws.Feed(std::string_view(&c, 1));
  EXPECT_FALSE(running);
  EXPECT_EQ(ws.status().reason(), "kube_event_too_large");
  EXPECT_TRUE(r.events.empty());
}

TEST(WatchStream, HandlerEndsIt) {
  Recorder r;
  r.go_on = false;
  WatchStream ws(1 << 20, r.Handler());
  EXPECT_FALSE(ws.Feed(Bookmark("1") + Bookmark("2")));
  EXPECT_TRUE(ws.status().ok());
  EXPECT_TRUE(ws.ended_by_handler());
  EXPECT_EQ(r.events.size(), 1u);
}

TEST(ParseWatchEvent, Refusals) {
  for (const char* bad : {"", "{", "[]", R"({"object":{}})", R"({"type":"ADDED"})", R"({"type":"ADDED","object":1})",
                          R"({"type":"SYNC","object":{}})", R"({"type":"BOOKMARK","object":{}})",
                          R"({"type":"BOOKMARK","object":{"metadata":{"resourceVersion":7}}})"}) {
    Result<WatchEvent> ev = ParseWatchEvent(bad);
    ASSERT_FALSE(ev.ok()) << bad;
    EXPECT_EQ(ev.status().reason(), "kube_response_invalid") << bad;
  }
  const std::string line = Line("ADDED", CsrObject("csr-a", "10"));
  for (size_t n = 0; n + 1 < line.size(); ++n) {
    EXPECT_FALSE(ParseWatchEvent(std::string_view(line).substr(0, n)).ok()) << n;
  }
}

TEST(ApiStatus, Table) {
  EXPECT_EQ(FromHttpAnswer(401, "").reason(), "kube_unauthorized");
  const Status forbidden = FromHttpAnswer(
      403, R"({"kind":"Status","reason":"Forbidden","message":"certificatesigningrequests is forbidden","code":403})");
  EXPECT_EQ(forbidden.reason(), "kube_forbidden");
  EXPECT_NE(forbidden.message().find("certificatesigningrequests/approval"), std::string::npos);
  EXPECT_NE(forbidden.message().find("is forbidden"), std::string::npos);
  EXPECT_EQ(FromHttpAnswer(404, "").reason(), "kube_not_found");
  EXPECT_EQ(FromHttpAnswer(409, "").reason(), "kube_conflict");
  EXPECT_EQ(FromHttpAnswer(410, "").reason(), "kube_gone");
  EXPECT_EQ(FromHttpAnswer(422, "").reason(), "kube_invalid");
  EXPECT_EQ(FromHttpAnswer(429, "").reason(), "kube_unavailable");
  EXPECT_EQ(FromHttpAnswer(503, "<html>").reason(), "kube_unavailable");
  EXPECT_EQ(FromHttpAnswer(400, "").reason(), "kube_http_error");
  // Server text is cut and made printable.
  const Status long_one = FromHttpAnswer(500, std::string(100000, 'x') + "\n\x07");
  EXPECT_LT(long_one.message().size(), 400u);
  EXPECT_EQ(long_one.message().find('\n'), std::string::npos);
}

}  // namespace
}  // namespace rackgate::kube
