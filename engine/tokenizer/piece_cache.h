// The ids of pieces of text that one Encode call has already encoded.
// Private to engine/tokenizer.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "engine/tokenizer/tokenizer.h"

namespace tessera::tokenizer_internal {

// Pieces (words, or parts of long words) at least this long reach BPE in
// parts split where no merge can join two characters (HfBpe, the GGUF
// SentencePiece tokenizer); shorter ones, the output of regex
// pre-tokenizers, gain nothing from it.
inline constexpr size_t kLongPieceBytes = 64;

// A piece's ids are kept as a range of the call's output, which only grows
// during the call; a piece met again is copied instead of merged. At most
// 65,536 pieces are kept.
class PieceCache {
 public:
  // Appends the ids of `piece` and returns true if this call has seen it.
  bool CopyTo(std::string_view piece, std::vector<TokenId>* out) const {
    auto it = ranges_.find(absl::string_view(piece.data(), piece.size()));
    if (it == ranges_.end()) return false;
    for (size_t i = it->second.first; i < it->second.second; ++i) {
      const TokenId id = (*out)[i];
      out->push_back(id);
    }
    return true;
  }
  // Notes that out[first, out.size()) are the ids of `piece`.
  void Remember(std::string_view piece, size_t first, const std::vector<TokenId>& out) {
    if (ranges_.size() < kMaxPieces) {
      ranges_.emplace(std::string(piece), std::pair{first, out.size()});
    }
  }

 private:
  static constexpr size_t kMaxPieces = 1 << 16;
  absl::flat_hash_map<std::string, std::pair<size_t, size_t>> ranges_;
};

}  // namespace tessera::tokenizer_internal
