#include "daemon/http.h"

#include <stdexcept>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace rackgate::daemon {
namespace {

Request Make(const std::string& method, const std::string& path) {
  Request r;
  r.method = method;
  r.path = path;
  return r;
}

std::string HeaderOf(const Response& r, const std::string& name) {
  for (const auto& [n, v] : r.headers) {
    if (!HeaderLess()(n, name) && !HeaderLess()(name, n)) return v;
  }
  return "";
}

Handler Echo(const std::string& tag) {
  return [tag](const Request& req) {
    std::string params;
    for (const auto& [k, v] : req.path_params) params += k + "=" + v + ";";
    return Response::Text(200, tag + ":" + params);
  };
}

TEST(HeaderLess, CaseInsensitive) {
  Headers h;
  h["Content-Type"] = "a";
  h["content-type"] = "b";
  EXPECT_EQ(h.size(), 1u);
  EXPECT_EQ(h["CONTENT-TYPE"], "b");
  EXPECT_TRUE(HeaderLess()("accept", "Content-Type"));
  EXPECT_FALSE(HeaderLess()("X-A", "x-a"));
  EXPECT_FALSE(HeaderLess()("x-a", "X-A"));
  EXPECT_TRUE(HeaderLess()("x-a", "X-AB"));
}

TEST(Request, Header) {
  Request r;
  r.headers["Authorization"] = "Bearer x";
  EXPECT_EQ(r.Header("authorization"), "Bearer x");
  EXPECT_FALSE(r.Header("X-Missing").has_value());
}

TEST(Response, ErrorShapeAndRetryAfter) {
  Response r = Response::Error(503, "busy", "try \"later\"", 30);
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(r.content_type, "application/json");
  auto j = nlohmann::json::parse(r.body);
  EXPECT_EQ(j.at("error").at("reason"), "busy");
  EXPECT_EQ(j.at("error").at("message"), "try \"later\"");
  EXPECT_EQ(HeaderOf(r, "Retry-After"), "30");
  EXPECT_EQ(HeaderOf(Response::Error(403, "x", "y"), "Retry-After"), "");
  // The bytes rackgated has always sent, and the reason kept beside them
  // for the admin refusal log (no second reading of the body).
  EXPECT_EQ(r.body, R"({"error":{"message":"try \"later\"","reason":"busy"}})");
  EXPECT_EQ(r.reason, "busy");
  EXPECT_EQ(Response::Json(200, "{}").reason, "");
}

TEST(Response, ErrorWithInvalidUtf8DoesNotThrow) {
  Response r = Response::Error(400, "bad", std::string("\xff\xfe", 2));
  EXPECT_FALSE(nlohmann::json::parse(r.body, nullptr, false).is_discarded());
}

TEST(Response, JsonAndText) {
  Response j = Response::Json(201, "{}");
  EXPECT_EQ(j.status, 201);
  EXPECT_EQ(j.body, "{}");
  Response t = Response::Text(200, "hi");
  EXPECT_EQ(t.content_type, "text/plain; charset=utf-8");
}

TEST(Router, ExactAndParams) {
  Router router;
  router.Add("GET", "/config/{pool}", Echo("config"));
  router.Add("POST", "/v1/machines/{id}/actions/{verb}", Echo("action"));
  std::string route;
  Response r = router.Dispatch(Make("GET", "/config/worker"), &route);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "config:pool=worker;");
  EXPECT_EQ(route, "GET /config/{pool}");
  r = router.Dispatch(Make("POST", "/v1/machines/abc/actions/revoke"));
  EXPECT_EQ(r.body, "action:id=abc;verb=revoke;");
}

// The router is the one place a path's segments become parameters; it hands
// them to the handler and to the caller (the server's refusal log), also
// for a 405, where no handler runs.
TEST(Router, ParamsFromTheRouterOnly) {
  Router router;
  const auto one = [](const Request& req) {
    return Response::Text(200, req.OptionalPathParam("name").value_or("(all)"));
  };
  router.Add("GET", "/pools", one);
  router.Add("GET", "/pools/{name}", one);
  std::map<std::string, std::string> params;
  EXPECT_EQ(router.Dispatch(Make("GET", "/pools/a"), nullptr, &params).body, "a");
  EXPECT_EQ(params, (std::map<std::string, std::string>{{"name", "a"}}));
  EXPECT_EQ(router.Dispatch(Make("GET", "/pools"), nullptr, &params).body, "(all)");
  EXPECT_TRUE(params.empty());
  std::string route;
  EXPECT_EQ(router.Dispatch(Make("DELETE", "/pools/b"), &route, &params).status, 405);
  EXPECT_EQ(route, "/pools/{name}");
  EXPECT_EQ(params, (std::map<std::string, std::string>{{"name", "b"}}));
  params = {{"stale", "x"}};
  EXPECT_EQ(router.Dispatch(Make("GET", "/nothing"), nullptr, &params).status, 404);
  EXPECT_TRUE(params.empty()) << "a 404 matched no pattern";
}

TEST(Router, NotFound) {
  Router router;
  router.Add("GET", "/config/{pool}", Echo("config"));
  std::string route = "x";
  for (const char* path : {"/config", "/config/", "/config/a/b", "/configs/a", "", "config/a",
                           "/config//"}) {
    Response r = router.Dispatch(Make("GET", path), &route);
    EXPECT_EQ(r.status, 404) << path;
    EXPECT_EQ(route, "unmatched") << path;
    EXPECT_EQ(nlohmann::json::parse(r.body).at("error").at("reason"), "not_found");
  }
}

TEST(Router, MethodNotAllowedListsAllow) {
  Router router;
  router.Add("GET", "/things", Echo("list"));
  router.Add("POST", "/things", Echo("create"));
  std::string route;
  Response r = router.Dispatch(Make("DELETE", "/things"), &route);
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(HeaderOf(r, "Allow"), "GET, HEAD, POST");
  EXPECT_EQ(route, "/things");
}

TEST(Router, HeadUsesGet) {
  Router router;
  router.Add("GET", "/config/{pool}", Echo("get"));
  Response r = router.Dispatch(Make("HEAD", "/config/a"));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "get:pool=a;");  // the server drops it, keeping Content-Length
  router.Add("HEAD", "/config/{pool}", Echo("head"));
  EXPECT_EQ(router.Dispatch(Make("HEAD", "/config/a")).body, "head:pool=a;");
}

TEST(Router, HeadWithoutGetIs405) {
  Router router;
  router.Add("POST", "/x", Echo("post"));
  Response r = router.Dispatch(Make("HEAD", "/x"));
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(HeaderOf(r, "Allow"), "POST");
}

TEST(Router, LiteralBeatsParameter) {
  Router router;
  router.Add("GET", "/m/{id}", Echo("show"));
  router.Add("POST", "/m/import", Echo("import"));
  EXPECT_EQ(router.Dispatch(Make("GET", "/m/abc")).body, "show:id=abc;");
  EXPECT_EQ(router.Dispatch(Make("POST", "/m/import")).body, "import:");
  // The literal resource decides: GET on it is not the parameter route.
  Response r = router.Dispatch(Make("GET", "/m/import"));
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(HeaderOf(r, "Allow"), "POST");
}

TEST(Router, RootPath) {
  Router router;
  router.Add("GET", "/", Echo("root"));
  EXPECT_EQ(router.Dispatch(Make("GET", "/")).status, 200);
  EXPECT_EQ(router.Dispatch(Make("GET", "/x")).status, 404);
}

TEST(Router, BadPatternsThrow) {
  Router router;
  EXPECT_THROW(router.Add("GET", "no-slash", Echo("")), std::invalid_argument);
  EXPECT_THROW(router.Add("GET", "/a/{}", Echo("")), std::invalid_argument);
  EXPECT_THROW(router.Add("GET", "/a/{x}/{x}", Echo("")), std::invalid_argument);
  EXPECT_THROW(router.Add("GET", "/a/b{x}", Echo("")), std::invalid_argument);
  EXPECT_THROW(router.Add("", "/a", Echo("")), std::invalid_argument);
  router.Add("GET", "/a", Echo(""));
  EXPECT_THROW(router.Add("GET", "/a", Echo("")), std::invalid_argument);
}

TEST(Router, HandlerExceptionPropagates) {
  Router router;
  router.Add("GET", "/boom", [](const Request&) -> Response { throw std::runtime_error("x"); });
  EXPECT_THROW(router.Dispatch(Make("GET", "/boom")), std::runtime_error);
}

}  // namespace
}  // namespace rackgate::daemon
