// hystate._hy.gap_code and gap_apply: the sparse form in which
// hystate.vllm's ranks on other hosts send a part that changed a little,
// made and applied in one pass each.
//
// A part's changed values go as 16-bit gaps between their flat indices
// (gap k holds index[k] - index[k-1] - 1, index[-1] taken as -1, read
// unsigned) and the values at those indices. Where two changed indices lie
// 65536 or more apart, entries are added every 65536 indices in between
// (their value is the new one, which equals the old one), so every gap fits.
// Values are compared and copied as 2- or 4-byte integers: a bf16 or f32
// part is changed where its bits are.
//
// Both functions take 1-d C-contiguous buffers (numpy arrays, torch tensors'
// .numpy()) and run without the GIL; the caller must not change the buffers
// while they run.

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "errors.h"

namespace hy::python {

namespace py = pybind11;

namespace {

constexpr int64_t kGapSpan = 1 << 16;  // The largest distance a gap holds.

// A 1-d contiguous buffer's data, length and item size, or InvalidArgument.
struct Flat {
  void* data = nullptr;
  int64_t n = 0;
  int64_t itemsize = 0;
};

Flat FlatOf(const py::buffer& b, bool writable, const char* what) {
  const py::buffer_info info = b.request(writable);
  if (info.ndim != 1 ||
      (info.shape[0] > 1 && info.strides[0] != info.itemsize)) {
    ThrowStatus(Status::InvalidArgument(std::string(what) +
                                        ": a 1-d contiguous buffer is needed"));
  }
  return {info.ptr, info.shape[0], info.itemsize};
}

// Gaps and values of where `now` differs from `old` (n each) into `gaps`
// and `vals` (room for most + 1 each); the count, or -1 once it passes
// `most`.
template <typename W>
int64_t Code(const W* now, const W* old, int64_t n, int64_t most,
             uint16_t* gaps, W* vals) {
  constexpr int64_t kBlock = 64 / sizeof(W);  // A cache line's values.
  int64_t count = 0, last = -1, i = 0;
  auto put = [&](int64_t at) {
    while (at - last > kGapSpan) {  // Fillers: the value is unchanged.
      last += kGapSpan;
      gaps[count] = kGapSpan - 1;
      vals[count] = now[last];
      if (++count > most) return false;
    }
    gaps[count] = static_cast<uint16_t>(at - last - 1);
    vals[count] = now[at];
    last = at;
    return ++count <= most;
  };
  while (i < n) {
    if (i + kBlock <= n && std::memcmp(now + i, old + i, 64) == 0) {
      i += kBlock;
      continue;
    }
    const int64_t end = std::min(n, i + kBlock);
    for (; i < end; ++i) {
      if (now[i] != old[i] && !put(i)) return -1;
    }
  }
  return count;
}

template <typename W>
void Apply(W* dst, const uint16_t* gaps, const W* vals, int64_t count) {
  int64_t at = -1;
  for (int64_t k = 0; k < count; ++k) {
    at += static_cast<int64_t>(gaps[k]) + 1;
    dst[at] = vals[k];
  }
}

py::object GapCode(const py::buffer& now_b, const py::buffer& old_b,
                   int64_t most) {
  const Flat now = FlatOf(now_b, false, "gap_code's new values");
  const Flat old = FlatOf(old_b, false, "gap_code's old values");
  if (now.n != old.n || now.itemsize != old.itemsize ||
      (now.itemsize != 2 && now.itemsize != 4)) {
    ThrowStatus(Status::InvalidArgument(
        "gap_code: two buffers of the same length of 2- or 4-byte items are "
        "needed, not " +
        std::to_string(now.n) + " x " + std::to_string(now.itemsize) + " and " +
        std::to_string(old.n) + " x " + std::to_string(old.itemsize) +
        " bytes"));
  }
  if (most < 0) most = 0;
  // Room for most + 1 entries; pages past those written are never touched.
  const int64_t room = std::min(most, now.n + now.n / kGapSpan) + 1;
  py::array_t<int16_t> gaps(room);
  py::array vals = now.itemsize == 2
                       ? py::array(py::dtype::of<int16_t>(), room)
                       : py::array(py::dtype::of<int32_t>(), room);
  auto* g = reinterpret_cast<uint16_t*>(gaps.mutable_data());
  int64_t count;
  {
    py::gil_scoped_release release;
    count = now.itemsize == 2
                ? Code(static_cast<const uint16_t*>(now.data),
                       static_cast<const uint16_t*>(old.data), now.n, most, g,
                       static_cast<uint16_t*>(vals.mutable_data()))
                : Code(static_cast<const uint32_t*>(now.data),
                       static_cast<const uint32_t*>(old.data), now.n, most, g,
                       static_cast<uint32_t*>(vals.mutable_data()));
  }
  if (count < 0) return py::none();
  const py::slice first(0, count, 1);
  return py::make_tuple(gaps[first], vals[first]);
}

void GapApply(const py::buffer& dst_b, const py::buffer& gaps_b,
              const py::buffer& vals_b) {
  const Flat dst = FlatOf(dst_b, true, "gap_apply's target");
  const Flat gaps = FlatOf(gaps_b, false, "gap_apply's gaps");
  const Flat vals = FlatOf(vals_b, false, "gap_apply's values");
  if (gaps.itemsize != 2 || vals.itemsize != dst.itemsize ||
      (dst.itemsize != 2 && dst.itemsize != 4) || vals.n != gaps.n) {
    ThrowStatus(Status::InvalidArgument(
        "gap_apply: " + std::to_string(gaps.n) + " gaps of " +
        std::to_string(gaps.itemsize) + " bytes, " + std::to_string(vals.n) +
        " values of " + std::to_string(vals.itemsize) + " for a target of " +
        std::to_string(dst.itemsize) + "-byte items"));
  }
  const auto* g = static_cast<const uint16_t*>(gaps.data);
  int64_t last = -1;
  {
    py::gil_scoped_release release;
    for (int64_t k = 0; k < gaps.n; ++k) last += static_cast<int64_t>(g[k]) + 1;
  }
  if (last >= dst.n) {  // Checked before anything is written.
    ThrowStatus(Status::InvalidArgument("index " + std::to_string(last) +
                                        " in a part of " +
                                        std::to_string(dst.n) + " values"));
  }
  py::gil_scoped_release release;
  if (dst.itemsize == 2) {
    Apply(static_cast<uint16_t*>(dst.data), g,
          static_cast<const uint16_t*>(vals.data), gaps.n);
  } else {
    Apply(static_cast<uint32_t*>(dst.data), g,
          static_cast<const uint32_t*>(vals.data), gaps.n);
  }
}

}  // namespace

void BindGaps(py::module_& m) {
  m.def("gap_code", &GapCode, py::arg("new"), py::arg("old"), py::arg("most"),
        "Where 1-d `new` and `old` (2- or 4-byte items) differ, as (int16 "
        "gaps, the new values there), fillers included; None once more than "
        "`most` entries would be needed.");
  m.def("gap_apply", &GapApply, py::arg("dst"), py::arg("gaps"),
        py::arg("values"),
        "Writes gap_code's values into 1-d `dst` at the indices its gaps "
        "encode; InvalidArgument (nothing written) for an index past the "
        "end.");
}

}  // namespace hy::python
