#include "runtime/plans/exchange.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/status.h"

namespace tessel {
namespace {

// How long a process waits for a peer's descriptor once every process has
// its socket open.
constexpr int kAcceptSeconds = 30;

// Closes a descriptor when it goes out of scope.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

// An abstract-namespace address (no file left behind): the job's token and the rank.
sockaddr_un address(uint64_t token, int rank, socklen_t* length) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::string name = absl::StrCat("tessel-fds-", absl::Hex(token), "-", rank);
  std::memcpy(a.sun_path + 1, name.data(), name.size());
  *length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  return a;
}

absl::Status errno_error(absl::string_view what, absl::string_view call) {
  return absl::UnavailableError(absl::StrCat(what, ": ", call, " failed: ", std::strerror(errno)));
}

// One descriptor and the sender's rank: what each connection carries.
struct FdMessage {
  FdMessage() {
    header.msg_iov = &data;
    header.msg_iovlen = 1;
    header.msg_control = control;
    header.msg_controllen = sizeof(control);
  }
  FdMessage(const FdMessage&) = delete;
  FdMessage& operator=(const FdMessage&) = delete;
  int32_t rank = -1;
  iovec data{&rank, sizeof(rank)};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr header{};
};

// Sends `fd` with the sender's rank over a new connection to `peer`.
absl::Status send_fd(uint64_t token, int rank, int peer, int fd, absl::string_view what) {
  Fd s(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (s.fd < 0) return errno_error(what, "socket");
  socklen_t length = 0;
  sockaddr_un to = address(token, peer, &length);
  if (connect(s.fd, reinterpret_cast<sockaddr*>(&to), length) != 0) {
    return errno_error(what, absl::StrCat("connecting to rank ", peer));
  }
  FdMessage message;
  message.rank = rank;
  cmsghdr* c = CMSG_FIRSTHDR(&message.header);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
  if (sendmsg(s.fd, &message.header, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof(message.rank))) {
    return errno_error(what, absl::StrCat("sending to rank ", peer));
  }
  return absl::OkStatus();
}

// Accepts one connection on `listener`; stores the sender's descriptor in fds.
absl::Status receive_fd(int listener, int size, std::vector<int>& fds, absl::string_view what) {
  Fd s(accept4(listener, nullptr, nullptr, SOCK_CLOEXEC));
  if (s.fd < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      return absl::DeadlineExceededError(
          absl::StrCat(what, ": a peer sent no descriptor within ", kAcceptSeconds, " s"));
    }
    return errno_error(what, "accept");
  }
  FdMessage message;
  if (recvmsg(s.fd, &message.header, MSG_CMSG_CLOEXEC) != static_cast<ssize_t>(sizeof(message.rank))) {
    return errno_error(what, "recvmsg");
  }
  const int32_t from = message.rank;
  cmsghdr* c = CMSG_FIRSTHDR(&message.header);
  if (c == nullptr || c->cmsg_type != SCM_RIGHTS || from < 0 || from >= size || fds[from] >= 0) {
    return absl::DataLossError(
        absl::StrCat(what, ": a peer's message carried no descriptor or a wrong rank (", from, ")"));
  }
  std::memcpy(&fds[from], CMSG_DATA(c), sizeof(int));
  return absl::OkStatus();
}

}  // namespace

absl::Status agree_ok(Bootstrap& boot, const absl::Status& local, absl::string_view what) {
  TESSEL_ASSIGN_OR_RETURN(std::vector<char> all, gather(boot, static_cast<char>(local.ok()), what));
  if (!local.ok()) return local;
  for (int r = 0; r < boot.size(); ++r) {
    if (all[r] == 0) {
      return absl::FailedPreconditionError(
          absl::StrCat(what, ": rank ", r, " failed (its process reports why), so every rank gives up"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int>> exchange_fds(Bootstrap& boot, int fd, absl::string_view what) {
  const int rank = boot.rank(), size = boot.size();
  // Rank 0's token names this exchange's sockets, apart from any other job's.
  uint64_t token = std::random_device{}() ^ (uint64_t{static_cast<uint32_t>(getpid())} << 32) ^
                   static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  TESSEL_ASSIGN_OR_RETURN(std::vector<uint64_t> tokens, gather(boot, token, what));
  token = tokens[0];

  Fd listener(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  absl::Status listening =
      fd < 0 ? absl::FailedPreconditionError(absl::StrCat(what, ": nothing to share")) : absl::OkStatus();
  if (listening.ok() && listener.fd < 0) listening = errno_error(what, "socket");
  if (listening.ok()) {
    socklen_t length = 0;
    sockaddr_un self = address(token, rank, &length);
    timeval limit{kAcceptSeconds, 0};
    if (bind(listener.fd, reinterpret_cast<sockaddr*>(&self), length) != 0) {
      listening = errno_error(what, "bind");
    } else if (listen(listener.fd, size) != 0) {
      listening = errno_error(what, "listen");
    } else if (setsockopt(listener.fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit)) != 0) {
      listening = errno_error(what, "setsockopt");
    }
  }
  TESSEL_RETURN_IF_ERROR(agree_ok(boot, listening, what));

  // Connections queue in the listeners' backlogs, so every process sends
  // all of its descriptors before it accepts any.
  std::vector<int> fds(size, -1);
  absl::Status status = absl::OkStatus();
  for (int p = 0; p < size && status.ok(); ++p) {
    if (p != rank) status = send_fd(token, rank, p, fd, what);
  }
  for (int n = 0; n < size - 1 && status.ok(); ++n) status = receive_fd(listener.fd, size, fds, what);
  if (!status.ok()) {
    for (int f : fds) {
      if (f >= 0) close(f);
    }
    return status;
  }
  fds[rank] = fd;
  return fds;
}

}  // namespace tessel
