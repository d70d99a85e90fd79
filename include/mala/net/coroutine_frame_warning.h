// GCC 12 takes the frames of asio's coroutines (allocated and freed by awaitable_frame_base's own operator
// new/delete) for mismatched allocations once it inlines enough of them into one function: a false positive
// (GCC bug 109224; seen with asio by others too, e.g. erigontech/silkworm#2046). A file that runs such
// coroutines includes this header, which silences the warning to the end of that file.
#pragma once

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
