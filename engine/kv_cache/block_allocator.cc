#include "engine/kv_cache/block_allocator.h"

#include "absl/strings/str_cat.h"

namespace tessera {

BlockTable::BlockTable(BlockTable&& other) noexcept
    : allocator_(other.allocator_), blocks_(std::move(other.blocks_)) {
  other.blocks_.clear();
}

BlockTable& BlockTable::operator=(BlockTable&& other) noexcept {
  if (this != &other) {
    Reset();
    allocator_ = other.allocator_;
    blocks_ = std::move(other.blocks_);
    other.blocks_.clear();
  }
  return *this;
}

absl::Status BlockTable::EnsureCapacity(int32_t num_tokens) {
  if (allocator_ == nullptr) return absl::FailedPreconditionError("block table has no allocator");
  const int32_t need = allocator_->BlocksFor(num_tokens) - static_cast<int32_t>(blocks_.size());
  if (need <= 0) return absl::OkStatus();
  auto got = allocator_->Allocate(need);
  if (!got.ok()) return got.status();
  blocks_.insert(blocks_.end(), got->begin(), got->end());
  return absl::OkStatus();
}

void BlockTable::Reset() {
  if (allocator_ != nullptr && !blocks_.empty()) allocator_->Free(blocks_);
  blocks_.clear();
}

int32_t BlockTable::capacity_tokens() const {
  return allocator_ ? static_cast<int32_t>(blocks_.size()) * allocator_->block_size() : 0;
}

int32_t BlockTable::Slot(int32_t t) const {
  const int32_t bs = allocator_->block_size();
  return blocks_[t / bs] * bs + t % bs;
}

BlockAllocator::BlockAllocator(int32_t num_blocks, int32_t block_size)
    : num_blocks_(num_blocks), block_size_(block_size) {
  free_.reserve(num_blocks);
  for (int32_t b = num_blocks - 1; b >= 0; --b) free_.push_back(b);
}

double BlockAllocator::usage_ratio() const {
  return num_blocks_ == 0 ? 0.0 : static_cast<double>(num_used()) / num_blocks_;
}

int32_t BlockAllocator::BlocksFor(int32_t num_tokens) const {
  return (num_tokens + block_size_ - 1) / block_size_;
}

absl::StatusOr<std::vector<int32_t>> BlockAllocator::Allocate(int32_t count) {
  if (count > num_free()) {
    return absl::ResourceExhaustedError(
        absl::StrCat("KV cache: ", count, " blocks wanted, ", num_free(), " free"));
  }
  std::vector<int32_t> out(free_.end() - count, free_.end());
  free_.resize(free_.size() - count);
  return out;
}

void BlockAllocator::Free(const std::vector<int32_t>& blocks) {
  free_.insert(free_.end(), blocks.rbegin(), blocks.rend());
}

}  // namespace tessera
