#include "kube/informer.h"

#include <gtest/gtest.h>

#include <deque>
#include <mutex>
#include <thread>

namespace rackgate::kube {
namespace {

using std::chrono::milliseconds;

Csr MakeCsr(const std::string& name) {
  Csr c;
  c.name = name;
  return c;
}

WatchEvent Event(WatchEvent::Type type, const std::string& name, const std::string& rv) {
  WatchEvent ev;
  ev.type = type;
  ev.object = MakeCsr(name);
  ev.resource_version = rv;
  return ev;
}

// Lists and watches from scripts; once the watch scripts are used up, a
// watch blocks until stopped, as a quiet server's would.
class FakeSource : public CsrSource {
 public:
  struct WatchScript {
    std::vector<WatchEvent> events;
    Status end;
  };

  Result<CsrList> ListCsrs(std::string_view continue_token, int limit) override {
    std::lock_guard<std::mutex> lock(mu);
    list_calls.emplace_back(continue_token);
    EXPECT_EQ(limit, 100);
    if (pages.empty()) return Status::IoError("kube_unavailable", "no script");
    Result<CsrList> page = pages.front();
    pages.pop_front();
    return page;
  }

  Status Watch(std::string_view rv, int, const WatchHandler& on_event, std::atomic<bool>* stop) override {
    WatchScript script;
    {
      std::lock_guard<std::mutex> lock(mu);
      watch_rvs.emplace_back(rv);
      if (watches.empty()) {
        script.end = Status::Ok();
        script.events.clear();
        idle = true;
      } else {
        script = watches.front();
        watches.pop_front();
      }
    }
    for (const WatchEvent& ev : script.events) {
      if (!on_event(ev)) return Status::Ok();
    }
    if (script.events.empty() && script.end.ok()) {
      while (!stop->load()) std::this_thread::sleep_for(milliseconds(5));
    }
    return script.end;
  }

  bool Idle() {
    std::lock_guard<std::mutex> lock(mu);
    return idle;
  }

  std::mutex mu;
  std::deque<Result<CsrList>> pages;
  std::deque<WatchScript> watches;
  std::vector<std::string> list_calls;
  std::vector<std::string> watch_rvs;
  bool idle = false;
};

CsrList Page(std::vector<std::string> names, const std::string& rv, const std::string& next) {
  CsrList p;
  for (const auto& n : names) p.items.push_back(MakeCsr(n));
  p.resource_version = rv;
  p.continue_token = next;
  return p;
}

InformerOptions FastOptions() {
  InformerOptions o;
  o.backoff_base = milliseconds(10);
  o.backoff_cap = milliseconds(40);
  o.min_watch = milliseconds(0);
  return o;
}

// Runs the informer until the fake is idle (or 5 s), then stops it.
void RunUntilIdle(CsrInformer* informer, FakeSource* source) {
  std::thread t([informer] { informer->Run(); });
  for (int i = 0; i < 1000 && !source->Idle(); ++i) std::this_thread::sleep_for(milliseconds(5));
  informer->Stop();
  t.join();
}

TEST(CsrInformer, ListsPagesThenWatchesAndRelistsWhenGone) {
  FakeSource source;
  source.pages = {Page({"a", "b"}, "100", "tok1"), Page({"c"}, "ignored", ""), Page({"a"}, "300", "")};
  source.watches = {
      {{Event(WatchEvent::Type::kAdded, "d", "101"), Event(WatchEvent::Type::kBookmark, "", "150"),
        Event(WatchEvent::Type::kDeleted, "a", "151")},
       Status::Ok()},
      {{Event(WatchEvent::Type::kModified, "d", "160")}, Status::NotFound("kube_gone", "expired")},
  };
  std::vector<std::string> seen;
  CsrInformer informer(&source, [&seen](const Csr& c) { seen.push_back(c.name); }, FastOptions());
  RunUntilIdle(&informer, &source);

  EXPECT_EQ(seen, (std::vector<std::string>{"a", "b", "c", "d", "d", "a"}));
  EXPECT_EQ(source.list_calls, (std::vector<std::string>{"", "tok1", ""}));
  // The first watch from the list's RV, the next from the last event's, the
  // one after the relist from the new list's.
  ASSERT_GE(source.watch_rvs.size(), 3u);
  EXPECT_EQ(source.watch_rvs[0], "100");
  EXPECT_EQ(source.watch_rvs[1], "151");
  EXPECT_EQ(source.watch_rvs[2], "300");
  const InformerCounters c = informer.Counters();
  EXPECT_EQ(c.lists, 2u);
  EXPECT_EQ(c.list_pages, 3u);
  EXPECT_EQ(c.gone, 1u);
  EXPECT_EQ(c.events, 4u);
  EXPECT_EQ(c.handled, 6u);
  EXPECT_EQ(c.errors, 0u);
}

TEST(CsrInformer, ListsEverythingAgainAfterTheResyncInterval) {
  FakeSource source;
  source.pages = {Page({"a"}, "1", ""), Page({"a"}, "3", "")};
  source.watches = {{{Event(WatchEvent::Type::kAdded, "d", "2")}, Status::Ok()}};
  InformerOptions o = FastOptions();
  o.resync = milliseconds(1);
  std::vector<std::string> seen;
  CsrInformer informer(
      &source,
      [&seen](const Csr& c) {
        seen.push_back(c.name);
        std::this_thread::sleep_for(milliseconds(2));  // the interval passes
      },
      o);
  RunUntilIdle(&informer, &source);
  // The list, the watch's event, then, the interval over, the list again.
  EXPECT_EQ(seen, (std::vector<std::string>{"a", "d", "a"}));
  EXPECT_EQ(source.list_calls.size(), 2u);
  EXPECT_EQ(informer.Counters().lists, 2u);
}

TEST(CsrInformer, ErrorsBackOffAndRetry) {
  FakeSource source;
  source.pages = {Status::IoError("kube_unavailable", "down"), Status::IoError("kube_unavailable", "down"),
                  Page({"a"}, "5", "")};
  source.watches = {{{}, Status::IoError("kube_unavailable", "reset")}};
  int handled = 0;
  CsrInformer informer(&source, [&handled](const Csr&) { ++handled; }, FastOptions());
  RunUntilIdle(&informer, &source);
  EXPECT_EQ(handled, 1);
  const InformerCounters c = informer.Counters();
  EXPECT_EQ(c.errors, 3u);
  EXPECT_EQ(c.reconnects, 3u);
  // A failed watch resumes from the same resourceVersion, without a relist.
  ASSERT_GE(source.watch_rvs.size(), 2u);
  EXPECT_EQ(source.watch_rvs[0], "5");
  EXPECT_EQ(source.watch_rvs[1], "5");
  EXPECT_EQ(c.lists, 1u);
}

TEST(CsrInformer, SkippedObjectsAndThrowingHandler) {
  FakeSource source;
  CsrList page = Page({"a", "boom"}, "1", "");
  page.skipped = {"x: bad"};
  source.pages = {page};
  WatchEvent invalid = Event(WatchEvent::Type::kAdded, "", "2");
  invalid.object_status = Status::InvalidArgument("kube_csr_invalid", "bad");
  source.watches = {{{invalid}, Status::Ok()}};
  std::vector<std::string> seen;
  CsrInformer informer(&source, [&seen](const Csr& c) {
    if (c.name == "boom") throw std::runtime_error("handler bug");
    seen.push_back(c.name);
  }, FastOptions());
  RunUntilIdle(&informer, &source);
  EXPECT_EQ(seen, std::vector<std::string>{"a"});
  const InformerCounters c = informer.Counters();
  EXPECT_EQ(c.skipped, 2u);
  EXPECT_EQ(c.errors, 1u);
  EXPECT_EQ(informer.ResourceVersion(), "2");
}

TEST(CsrInformer, StopInterruptsABackoffWait) {
  FakeSource source;  // every list fails
  InformerOptions o = FastOptions();
  o.backoff_base = milliseconds(60000);
  o.backoff_cap = milliseconds(60000);
  CsrInformer informer(&source, [](const Csr&) {}, o);
  std::thread t([&informer] { informer.Run(); });
  for (int i = 0; i < 400 && informer.Counters().reconnects == 0; ++i) std::this_thread::sleep_for(milliseconds(5));
  const auto start = std::chrono::steady_clock::now();
  informer.Stop();
  t.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(1000));
  EXPECT_EQ(informer.Counters().reconnects, 1u);
}

TEST(CsrInformer, StopBeforeRun) {
  FakeSource source;
  CsrInformer informer(&source, [](const Csr&) {}, FastOptions());
  informer.Stop();
  informer.Run();
  EXPECT_TRUE(source.list_calls.empty());
}

TEST(InformerBackoff, DoublesToTheCapWithEqualJitter) {
  const milliseconds base(1000), cap(30000);
  EXPECT_EQ(InformerBackoff(0, 0.0, base, cap), milliseconds(500));
  EXPECT_EQ(InformerBackoff(0, 1.0, base, cap), milliseconds(1000));
  EXPECT_EQ(InformerBackoff(1, 1.0, base, cap), milliseconds(2000));
  EXPECT_EQ(InformerBackoff(4, 1.0, base, cap), milliseconds(16000));
  EXPECT_EQ(InformerBackoff(5, 1.0, base, cap), milliseconds(30000));
  EXPECT_EQ(InformerBackoff(1000000, 0.5, base, cap), milliseconds(22500));
  EXPECT_EQ(InformerBackoff(5, 0.0, base, cap), milliseconds(15000));
}

}  // namespace
}  // namespace rackgate::kube
