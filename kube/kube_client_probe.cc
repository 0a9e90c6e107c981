// kube-client-probe: the Kubernetes lab's driver of kube::Client against a
// real API server (not installed). One JSON line per CSR or event on stdout;
// a failure is one JSON line {"error": reason, "message": ...} and exit 1.
//
//   kube-client-probe (--kubeconfig FILE [--context NAME] | --in-cluster)
//                     [--resource-version RV] [--hold FILE]
//                     list | watch SECONDS | approve NAME | deny NAME
// --resource-version: where `watch` starts (default: now, with the existing
// CSRs as ADDED events).
// --hold FILE: approve/deny read the CSR, print {"read": NAME, "uid": UID},
// and write the decision only once FILE exists (at most 120 s), as
// rackgated does (kube::WriteDecision): the lab swaps the CSR meanwhile.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <thread>

#include "kube/approval.h"
#include "kube/client.h"
#include "kube/csr.h"
#include "kube/kubeconfig.h"

namespace {

using json = nlohmann::json;
using rackgate::Result;
using rackgate::Status;
namespace kube = rackgate::kube;

std::atomic<bool> g_stop{false};

void OnSignal(int) { g_stop = true; }

void Print(const json& j) {
  std::cout << j.dump(-1, ' ', false, json::error_handler_t::replace) << "\n" << std::flush;
}

int Fail(const Status& s) {
  Print({{"error", s.reason()}, {"message", s.message()}});  // admin-path: the probe's own line, no refusal
  return 1;
}

json CsrJson(const kube::Csr& c) {
  json conditions = json::array();
  for (const auto& k : c.conditions) {
    conditions.push_back({{"type", k.type}, {"status", k.status}, {"reason", k.reason}, {"message", k.message}});
  }
  return {{"name", c.name}, {"uid", c.uid}, {"resourceVersion", c.resource_version},
          {"creationTimestamp", c.creation_timestamp}, {"signerName", c.signer_name}, {"username", c.username},
          {"groups", c.groups}, {"usages", c.usages}, {"requestBytes", c.request_pem.size()},
          {"conditions", conditions}, {"approved", c.Approved()}, {"denied", c.Denied()},
          {"hasCertificate", c.has_certificate}};
}

const char* TypeName(kube::WatchEvent::Type t) {
  switch (t) {
    case kube::WatchEvent::Type::kAdded: return "ADDED";
    case kube::WatchEvent::Type::kModified: return "MODIFIED";
    case kube::WatchEvent::Type::kDeleted: return "DELETED";
    case kube::WatchEvent::Type::kBookmark: return "BOOKMARK";
    case kube::WatchEvent::Type::kError: return "ERROR";
  }
  return "?";
}

int List(kube::Client& client) {
  std::string token;
  do {
    Result<kube::CsrList> page = client.ListCsrs(token, 100);
    if (!page.ok()) return Fail(page.status());
    for (const kube::Csr& c : page->items) Print(CsrJson(c));
    for (const std::string& s : page->skipped) Print({{"skipped", s}});
    token = page->continue_token;
    if (token.empty()) Print({{"listResourceVersion", page->resource_version}});
  } while (!token.empty());
  return 0;
}

int Watch(kube::Client& client, int seconds, const std::string& rv) {
  Status s = client.Watch(rv, seconds, [](const kube::WatchEvent& ev) {
    json line = {{"type", TypeName(ev.type)}, {"resourceVersion", ev.resource_version}};
    if (ev.type != kube::WatchEvent::Type::kBookmark) {
      line["object"] = ev.object_status.ok() ? CsrJson(ev.object) : json(nullptr);
      if (!ev.object_status.ok()) line["objectError"] = ev.object_status.ToString();
    }
    Print(line);
    return true;
  }, &g_stop);
  if (!s.ok()) return Fail(s);
  Print({{"watchEnded", true}});
  return 0;
}

int Decide(kube::Client& client, const std::string& name, bool approve, const std::string& hold) {
  Result<kube::Csr> csr = client.GetCsr(name);
  if (!csr.ok()) return Fail(csr.status());
  if (!hold.empty()) {
    Print({{"read", name}, {"uid", csr->uid}, {"resourceVersion", csr->resource_version}});
    for (int i = 0; i < 1200 && !std::filesystem::exists(hold) && !g_stop; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  const kube::ApprovalDecision decision{approve, approve ? "RackgateProbeApproved" : "RackgateProbeDenied",
                                        "kube-client-probe"};
  Status s = kube::WriteDecision(&client, *csr, decision,
                                 [&](const kube::Csr&) { return std::optional<kube::ApprovalDecision>(decision); });
  if (!s.ok()) return Fail(s);
  Print({{"name", name}, {"uid", csr->uid}, {"result", approve ? "approved" : "denied"}});
  return 0;
}

int Usage() {
  std::cerr << "usage: kube-client-probe (--kubeconfig FILE [--context NAME] | --in-cluster) [--resource-version RV]\n"
               "                         [--hold FILE]\n"
               "                         list | watch SECONDS | approve NAME | deny NAME\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  std::string kubeconfig, context, rv, hold;
  bool in_cluster = false;
  size_t i = 0;
  for (; i < args.size() && args[i].rfind("--", 0) == 0; ++i) {
    if (args[i] == "--kubeconfig" && i + 1 < args.size()) {
      kubeconfig = args[++i];
    } else if (args[i] == "--context" && i + 1 < args.size()) {
      context = args[++i];
    } else if (args[i] == "--resource-version" && i + 1 < args.size()) {
      rv = args[++i];
    } else if (args[i] == "--hold" && i + 1 < args.size()) {
      hold = args[++i];
    } else if (args[i] == "--in-cluster") {
      in_cluster = true;
    } else {
      return Usage();
    }
  }
  if (i >= args.size() || in_cluster == !kubeconfig.empty()) return Usage();
  const std::string command = args[i];
  const std::string operand = i + 1 < args.size() ? args[i + 1] : "";
  if ((command == "list") != operand.empty() || i + 2 < args.size()) return Usage();

  Result<kube::Credentials> creds = in_cluster ? kube::InClusterCredentials() : kube::LoadKubeconfig(kubeconfig, context);
  if (!creds.ok()) return Fail(creds.status());
  Result<kube::Client> client = kube::Client::Create(std::move(*creds));
  if (!client.ok()) return Fail(client.status());
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  if (command == "list") return List(*client);
  if (command == "watch") {
    const int seconds = std::atoi(operand.c_str());
    return seconds > 0 ? Watch(*client, seconds, rv) : Usage();
  }
  if (command == "approve" || command == "deny") return Decide(*client, operand, command == "approve", hold);
  return Usage();
}
