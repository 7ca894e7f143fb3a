// ByteStream: a file's bytes, gunzipped on the fly (ISA-L, every member, zero padding allowed) when it is gzip.
#include "data/byte_stream.h"

#include <isa-l/igzip_lib.h>

#include <cstring>

namespace ddp {

ByteStream::ByteStream(const std::string& path) : in_(1 << 20), state_(std::make_unique<inflate_state>()) {
  file_ = std::fopen(path.c_str(), "rb");
  if (!file_ || !refill()) {
    failed_ = true;
    return;
  }
  gzip_ = in_len_ >= 2 && in_[0] == 0x1f && in_[1] == 0x8b;
  if (gzip_) {
    isal_inflate_init(state_.get());
    state_->crc_flag = ISAL_GZIP;
  }
}

ByteStream::~ByteStream() {
  if (file_) std::fclose(file_);
}

// More input at in_[in_pos_, in_len_); false at the end of the file or on a read error (failed_).
bool ByteStream::refill() {
  if (input_end_) return false;
  if (in_pos_ < in_len_) std::memmove(in_.data(), in_.data() + in_pos_, in_len_ - in_pos_);
  in_len_ -= in_pos_;
  in_pos_ = 0;
  const size_t got = std::fread(in_.data() + in_len_, 1, in_.size() - in_len_, file_);
  in_len_ += got;
  if (got == 0) {
    input_end_ = true;
    if (std::ferror(file_)) failed_ = true;
    return false;
  }
  return true;
}

size_t ByteStream::read(uint8_t* dst, size_t n) {
  if (failed_ || finished_) return 0;
  if (gzip_) return read_gzip(dst, n);
  size_t done = 0;
  while (done < n) {
    if (in_pos_ == in_len_ && !refill()) break;
    const size_t take = std::min(n - done, in_len_ - in_pos_);
    std::memcpy(dst + done, in_.data() + in_pos_, take);
    in_pos_ += take;
    done += take;
  }
  return done;
}

size_t ByteStream::read_gzip(uint8_t* dst, size_t n) {
  size_t done = 0;
  while (done < n && !failed_ && !finished_) {
    if (state_->block_state == ISAL_BLOCK_FINISH) {
      // One member is complete: nothing but zero padding may follow, or another member.
      while (true) {
        while (in_pos_ < in_len_ && in_[in_pos_] == 0) ++in_pos_;
        if (in_pos_ < in_len_ || !refill()) break;
      }
      if (in_pos_ == in_len_) {
        finished_ = true;
        break;
      }
      if (in_len_ - in_pos_ < 2 && !refill()) {
        failed_ = true;
        break;
      }
      if (in_[in_pos_] != 0x1f || in_[in_pos_ + 1] != 0x8b) {
        failed_ = true;
        break;
      }
      isal_inflate_reset(state_.get());
      state_->crc_flag = ISAL_GZIP;
    }
    if (in_pos_ == in_len_ && !refill()) {
      failed_ = true;  // the data ended inside a member
      break;
    }
    state_->next_in = in_.data() + in_pos_;
    state_->avail_in = static_cast<uint32_t>(in_len_ - in_pos_);
    state_->next_out = dst + done;
    state_->avail_out = static_cast<uint32_t>(std::min<size_t>(n - done, uint32_t(1) << 30));
    const uint32_t out_before = state_->avail_out;
    if (isal_inflate(state_.get()) != ISAL_DECOMP_OK) {
      failed_ = true;
      break;
    }
    in_pos_ = in_len_ - state_->avail_in;
    done += out_before - state_->avail_out;
  }
  return done;
}

size_t ByteStream::skip_rest() {
  std::vector<uint8_t> scratch(1 << 16);
  size_t total = 0;
  while (size_t got = read(scratch.data(), scratch.size())) total += got;
  return total;
}

}  // namespace ddp
