// Bounded HTTP transfers over libcurl.
#include "base/transfer.h"

#include <curl/curl.h>

#include <cctype>
#include <new>
#include <type_traits>
#include <utility>

namespace rackgate::transfer {

static_assert(std::is_same_v<CURL, void>, "base/transfer.h passes a CURL* as void*");

EasyHandle::EasyHandle() : curl_(curl_easy_init()), error_(new char[CURL_ERROR_SIZE]()) {
  if (curl_ == nullptr) throw std::bad_alloc();
}

EasyHandle::~EasyHandle() {
  if (curl_ != nullptr) curl_easy_cleanup(curl_);
}

EasyHandle::EasyHandle(EasyHandle&& other) noexcept
    : curl_(std::exchange(other.curl_, nullptr)), error_(std::move(other.error_)) {}

EasyHandle& EasyHandle::operator=(EasyHandle&& other) noexcept {
  if (this != &other) {
    if (curl_ != nullptr) curl_easy_cleanup(curl_);
    curl_ = std::exchange(other.curl_, nullptr);
    error_ = std::move(other.error_);
  }
  return *this;
}

HeaderList::~HeaderList() { curl_slist_free_all(static_cast<curl_slist*>(list_)); }

HeaderList::HeaderList(HeaderList&& other) noexcept : list_(std::exchange(other.list_, nullptr)) {}

HeaderList& HeaderList::operator=(HeaderList&& other) noexcept {
  if (this != &other) {
    curl_slist_free_all(static_cast<curl_slist*>(list_));
    list_ = std::exchange(other.list_, nullptr);
  }
  return *this;
}

void HeaderList::Add(const std::string& line) {
  curl_slist* l = curl_slist_append(static_cast<curl_slist*>(list_), line.c_str());
  if (l == nullptr) throw std::bad_alloc();
  list_ = l;
}

bool BodySink::Attach(void* curl) {
  return curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &BodySink::Write) == CURLE_OK &&
         curl_easy_setopt(curl, CURLOPT_WRITEDATA, this) == CURLE_OK &&
         curl_easy_setopt(curl, CURLOPT_MAXFILESIZE_LARGE, static_cast<curl_off_t>(max_)) == CURLE_OK;
}

size_t BodySink::Write(char* data, size_t size, size_t nmemb, void* self) {
  auto* sink = static_cast<BodySink*>(self);
  const size_t n = size * nmemb;
  // Stop as soon as the answer is over the bound: returning less than n
  // makes curl fail the transfer with CURLE_WRITE_ERROR.
  if (n > sink->max_ - sink->body_.size()) {
    sink->too_large_ = true;
    return 0;
  }
  sink->body_.append(data, n);
  return n;
}

HeaderSink::HeaderSink(std::string_view name, size_t max_value_bytes) : max_(max_value_bytes) {
  for (char c : name) prefix_ += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  prefix_ += ':';
}

bool HeaderSink::Attach(void* curl) {
  return curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, &HeaderSink::Write) == CURLE_OK &&
         curl_easy_setopt(curl, CURLOPT_HEADERDATA, this) == CURLE_OK;
}

size_t HeaderSink::Write(char* data, size_t size, size_t nmemb, void* self) {
  auto* sink = static_cast<HeaderSink*>(self);
  const size_t n = size * nmemb;
  std::string_view line(data, n);
  if (line.size() > sink->prefix_.size()) {
    bool match = true;
    for (size_t i = 0; i < sink->prefix_.size() && match; ++i) {
      match = std::tolower(static_cast<unsigned char>(line[i])) == sink->prefix_[i];
    }
    if (match) {
      std::string_view v = line.substr(sink->prefix_.size());
      while (!v.empty() && (v.back() == '\r' || v.back() == '\n')) v.remove_suffix(1);
      // Bounded: a value over the bound is not kept.
      if (v.size() <= sink->max_) sink->value_ = std::string(v);
    }
  }
  // A new status line (a 100 Continue before the answer) starts over.
  if (line.rfind("HTTP/", 0) == 0) sink->value_.reset();
  return n;
}

bool StreamSink::Attach(void* curl) {
  curl_ = curl;
  return curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &StreamSink::Write) == CURLE_OK &&
         curl_easy_setopt(curl, CURLOPT_WRITEDATA, this) == CURLE_OK;
}

size_t StreamSink::Write(char* data, size_t size, size_t nmemb, void* self) {
  auto* sink = static_cast<StreamSink*>(self);
  const size_t n = size * nmemb;
  if (sink->status_ == 0 && curl_easy_getinfo(sink->curl_, CURLINFO_RESPONSE_CODE, &sink->status_) != CURLE_OK) {
    sink->status_ = 0;
  }
  // No exception may cross libcurl's C frames: keep it and end the transfer.
  try {
    return sink->on_chunk_(sink->status_, std::string_view(data, n)) ? n : 0;
  } catch (...) {
    sink->exception_ = std::current_exception();
    return 0;
  }
}

namespace {

size_t Discard(char*, size_t size, size_t nmemb, void*) { return size * nmemb; }

}  // namespace

bool HttpsOnlyNoRedirects(void* curl) {
  return curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "https") == CURLE_OK &&
         curl_easy_setopt(curl, CURLOPT_REDIR_PROTOCOLS_STR, "https") == CURLE_OK &&
         curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L) == CURLE_OK;
}

bool VerifyPeerAgainstCallersCa(void* curl) {
  return curl_easy_setopt(curl, CURLOPT_CAPATH, nullptr) == CURLE_OK &&
         curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 1L) == CURLE_OK &&
         curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 2L) == CURLE_OK &&
         curl_easy_setopt(curl, CURLOPT_SSLVERSION, static_cast<long>(CURL_SSLVERSION_TLSv1_2)) == CURLE_OK;
}

bool DiscardBody(void* curl) { return curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &Discard) == CURLE_OK; }

Outcome Perform(EasyHandle& handle, const BodySink* body) {
  char* error = handle.error_.get();
  error[0] = '\0';
  Outcome out;
  const CURLcode rc = curl_easy_setopt(handle.curl_, CURLOPT_ERRORBUFFER, error) == CURLE_OK
                          ? curl_easy_perform(handle.curl_)
                          : CURLE_FAILED_INIT;
  out.curl_code = static_cast<int>(rc);
  out.too_large = rc == CURLE_FILESIZE_EXCEEDED || (body != nullptr && body->too_large());
  if (curl_easy_getinfo(handle.curl_, CURLINFO_RESPONSE_CODE, &out.http_status) != CURLE_OK) out.http_status = 0;
  if (rc != CURLE_OK) {
    if (curl_easy_getinfo(handle.curl_, CURLINFO_OS_ERRNO, &out.os_errno) != CURLE_OK) out.os_errno = 0;
    out.error = error[0] != '\0' ? error : curl_easy_strerror(rc);
    while (!out.error.empty() && out.error.back() == '\n') out.error.pop_back();
  }
  return out;
}

Status FailureStatus(const Outcome& outcome, size_t max_bytes, const FailureReasons& reasons) {  // reason-helper: IoError
  if (outcome.too_large) {
    return reasons.too_large_code(std::string(reasons.too_large), std::string(reasons.peer) +
                                                                   "'s answer is larger than " +
                                                                   std::to_string(max_bytes) + " bytes");
  }
  return Status::IoError(std::string(reasons.unreachable), std::string(reasons.unreachable_prefix) + outcome.error);
}

}  // namespace rackgate::transfer
