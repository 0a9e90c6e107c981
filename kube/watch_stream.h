// A watch's stream as it arrives: bytes split into lines (one JSON event
// each, newline-delimited), each bounded, parsed and handed on. No network
// here, so the tests feed it any chunking. Internal to kube/.
#ifndef RACKGATE_KUBE_WATCH_STREAM_H_
#define RACKGATE_KUBE_WATCH_STREAM_H_

#if !defined(RACKGATE_KUBE_INTERNAL)
#error "kube/watch_stream.h is internal to kube/"
#endif

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include "base/status.h"
#include "kube/client.h"

namespace rackgate::kube {

// Newline-delimited lines from chunks split anywhere. Holds at most one
// partial line of at most max_line bytes.
class LineSplitter {
 public:
  explicit LineSplitter(size_t max_line) : max_line_(max_line) {}

  // Calls on_line for each complete line in order (without its "\n"; a
  // trailing "\r" is dropped, empty lines are skipped). Stops when on_line
  // returns false (the rest of the chunk is dropped) and returns Ok then.
  // kCorruption "kube_event_too_large" as soon as a line (complete or not)
  // is longer than max_line; the splitter is then unusable.
  Status Feed(std::string_view chunk, const std::function<bool(std::string_view)>& on_line);

  // Bytes of an unfinished line (what was cut off when the stream ended).
  size_t pending() const { return partial_.size(); }

 private:
  size_t max_line_;
  std::string partial_;
};

// One line of a watch stream ({"type": ..., "object": {...}}) as a
// WatchEvent. An ADDED/MODIFIED/DELETED object that fails ParseCsr is still
// an event (object_status says why) so the stream goes on. kCorruption
// "kube_response_invalid" when the line is not a watch event at all.
Result<WatchEvent> ParseWatchEvent(std::string_view line);

// A watch in progress: feed it the body's chunks; it stops (Feed returns
// false) when the handler says so, on an ERROR event, or on a bad line, and
// status() then says which. ERROR events map through FromApiStatus (a 410
// is "kube_gone").
class WatchStream {
 public:
  WatchStream(size_t max_event, WatchHandler on_event) : splitter_(max_event), on_event_(std::move(on_event)) {}

  // False when the stream must end here.
  bool Feed(std::string_view chunk);
  // Ok while running and when the handler ended it; the reason otherwise.
  const Status& status() const { return status_; }
  bool ended_by_handler() const { return ended_by_handler_; }
  size_t events() const { return events_; }
  size_t pending() const { return splitter_.pending(); }

 private:
  bool OnLine(std::string_view line);

  LineSplitter splitter_;
  WatchHandler on_event_;
  Status status_;
  bool ended_by_handler_ = false;
  bool ended_ = false;
  size_t events_ = 0;
};

}  // namespace rackgate::kube

#endif  // RACKGATE_KUBE_WATCH_STREAM_H_
