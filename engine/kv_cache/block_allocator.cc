#include "engine/kv_cache/block_allocator.h"

#include <algorithm>
#include <iterator>

#include "absl/strings/str_cat.h"

namespace tessera {

uint64_t DefaultBlockHash(uint64_t parent, std::span<const int32_t> tokens, uint64_t extra) {
  constexpr uint64_t kPrime = 0x100000001b3ULL;
  uint64_t h = 0xcbf29ce484222325ULL;
  auto mix = [&](uint64_t word) {
    for (int byte = 0; byte < 8; ++byte) {
      h ^= (word >> (8 * byte)) & 0xff;
      h *= kPrime;
    }
  };
  mix(parent);
  mix(extra);
  mix(tokens.size());
  for (int32_t t : tokens) mix(static_cast<uint32_t>(t));
  // A final avalanche (splitmix64's), so that close inputs spread out.
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ULL;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebULL;
  return h ^ (h >> 31);
}

BlockTable::BlockTable(BlockTable&& other) noexcept
    : allocator_(other.allocator_),
      blocks_(std::move(other.blocks_)),
      hashes_(std::move(other.hashes_)),
      caching_stopped_(other.caching_stopped_) {
  other.blocks_.clear();
  other.hashes_.clear();
}

BlockTable& BlockTable::operator=(BlockTable&& other) noexcept {
  if (this != &other) {
    Reset();
    allocator_ = other.allocator_;
    blocks_ = std::move(other.blocks_);
    hashes_ = std::move(other.hashes_);
    caching_stopped_ = other.caching_stopped_;
    other.blocks_.clear();
    other.hashes_.clear();
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
  if (allocator_ != nullptr && !blocks_.empty()) allocator_->Release(blocks_);
  blocks_.clear();
  hashes_.clear();
  caching_stopped_ = false;
}

int32_t BlockTable::AdoptPrefix(const PrefixMatch& match) {
  if (allocator_ == nullptr || !blocks_.empty()) return 0;
  for (int32_t b : match.blocks) allocator_->AddRef(b);
  blocks_ = match.blocks;
  hashes_ = match.hashes;
  return match.num_tokens;
}

// A block computed by this table whose hash is already registered for
// identical contents is swapped for the registered one (its K/V are the
// same bits), so that the chain of cached blocks goes on; a collision stops
// caching for this table.
void BlockTable::CacheFullBlocks(std::span<const int32_t> tokens, int32_t num_computed,
                                 uint64_t extra) {
  if (allocator_ == nullptr || !allocator_->prefix_caching() || caching_stopped_) return;
  BlockAllocator& a = *allocator_;
  const int32_t bs = a.block_size();
  const size_t full = std::min<size_t>(num_computed / bs, blocks_.size());
  for (size_t i = hashes_.size(); i < full; ++i) {
    const uint64_t parent_hash = i == 0 ? 0 : hashes_[i - 1];
    const uint64_t parent_uid = i == 0 ? 0 : a.info_[blocks_[i - 1]].uid;
    std::span<const int32_t> span = tokens.subspan(i * bs, bs);
    const uint64_t h = a.prefix_.hash(parent_hash, span, extra);
    auto it = a.by_hash_.find(h);
    if (it == a.by_hash_.end()) {
      a.Register(blocks_[i], h, parent_uid, span, extra);
    } else if (a.Matches(it->second, span, extra, parent_uid)) {
      a.AddRef(it->second);
      a.Release({blocks_[i]});
      blocks_[i] = it->second;
    } else {
      caching_stopped_ = true;
      return;
    }
    hashes_.push_back(h);
  }
}

int32_t BlockTable::capacity_tokens() const {
  return allocator_ ? static_cast<int32_t>(blocks_.size()) * allocator_->block_size() : 0;
}

int32_t BlockTable::Slot(int32_t t) const {
  const int32_t bs = allocator_->block_size();
  return blocks_[t / bs] * bs + t % bs;
}

BlockAllocator::BlockAllocator(int32_t num_blocks, int32_t block_size, PrefixCacheOptions prefix)
    : num_blocks_(num_blocks), block_size_(block_size), prefix_(std::move(prefix)),
      info_(num_blocks) {
  if (!prefix_.hash) prefix_.hash = DefaultBlockHash;
  free_.reserve(num_blocks);
  for (int32_t b = num_blocks - 1; b >= 0; --b) free_.push_back(b);
}

double BlockAllocator::usage_ratio() const {
  return num_blocks_ == 0 ? 0.0 : static_cast<double>(num_used()) / num_blocks_;
}

int32_t BlockAllocator::BlocksFor(int32_t num_tokens) const {
  return (num_tokens + block_size_ - 1) / block_size_;
}

bool BlockAllocator::Matches(int32_t block, std::span<const int32_t> tokens, uint64_t extra,
                             uint64_t parent_uid) const {
  const BlockInfo& info = info_[block];
  return info.cached && info.extra == extra && info.parent_uid == parent_uid &&
         std::equal(tokens.begin(), tokens.end(), info.tokens.begin(), info.tokens.end());
}

PrefixMatch BlockAllocator::MatchPrefix(std::span<const int32_t> tokens, int32_t max_tokens,
                                        uint64_t extra) const {
  PrefixMatch match;
  if (!prefix_.enabled) return match;
  const int32_t limit = std::min<int32_t>(max_tokens, static_cast<int32_t>(tokens.size()));
  uint64_t parent_hash = 0, parent_uid = 0;
  for (int32_t i = 0; (i + 1) * block_size_ <= limit; ++i) {
    std::span<const int32_t> span = tokens.subspan(size_t(i) * block_size_, block_size_);
    const uint64_t h = prefix_.hash(parent_hash, span, extra);
    auto it = by_hash_.find(h);
    if (it == by_hash_.end() || !Matches(it->second, span, extra, parent_uid)) break;
    match.blocks.push_back(it->second);
    match.hashes.push_back(h);
    if (info_[it->second].ref == 0) ++match.num_evictable;
    parent_hash = h;
    parent_uid = info_[it->second].uid;
  }
  match.num_tokens = static_cast<int32_t>(match.blocks.size()) * block_size_;
  return match;
}

absl::StatusOr<std::vector<int32_t>> BlockAllocator::Allocate(int32_t count) {
  if (count > num_free()) {
    return absl::ResourceExhaustedError(
        absl::StrCat("KV cache: ", count, " blocks wanted, ", num_free(), " free"));
  }
  std::vector<int32_t> out;
  out.reserve(count);
  while (static_cast<int32_t>(out.size()) < count && !free_.empty()) {
    out.push_back(free_.back());
    free_.pop_back();
  }
  // Then the least recently released cached blocks.
  while (static_cast<int32_t>(out.size()) < count) {
    const int32_t b = evictable_.front();
    evictable_.pop_front();
    Evict(b);
    out.push_back(b);
  }
  for (int32_t b : out) info_[b].ref = 1;
  return out;
}

void BlockAllocator::AddRef(int32_t block) {
  BlockInfo& info = info_[block];
  if (info.ref++ == 0 && info.cached) evictable_.erase(info.lru);
}

void BlockAllocator::Release(const std::vector<int32_t>& blocks) {
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) {
    BlockInfo& info = info_[*it];
    if (--info.ref > 0) continue;
    if (info.cached) {
      info.lru = evictable_.insert(evictable_.end(), *it);
    } else {
      free_.push_back(*it);
    }
  }
}

void BlockAllocator::Register(int32_t block, uint64_t hash, uint64_t parent_uid,
                              std::span<const int32_t> tokens, uint64_t extra) {
  BlockInfo& info = info_[block];
  info.cached = true;
  info.hash = hash;
  info.extra = extra;
  info.uid = next_uid_++;
  info.parent_uid = parent_uid;
  info.tokens.assign(tokens.begin(), tokens.end());
  by_hash_[hash] = block;
}

void BlockAllocator::Evict(int32_t block) {
  BlockInfo& info = info_[block];
  auto it = by_hash_.find(info.hash);
  if (it != by_hash_.end() && it->second == block) by_hash_.erase(it);
  info.cached = false;
  info.uid = 0;
  info.parent_uid = 0;
  info.tokens.clear();
}

}  // namespace tessera
