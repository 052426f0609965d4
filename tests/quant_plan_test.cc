// PlanQuantization against the types llama.cpp's llama-quantize wrote for
// ten small models in ten file types (tests/data/quant/plan_reference.json,
// from tools/quant-vectors/gen-plan-reference.py).
#include "engine/quant/quantize_plan.h"

#include <fstream>
#include <string>
#include <vector>

#include "engine/quant/quant.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace tessera::quant {
namespace {

uint32_t TypeId(const std::string& name) {
  if (name == "f32") return kGgmlF32;
  if (name == "f16") return kGgmlF16;
  if (name == "bf16") return kGgmlBF16;
  const std::optional<QuantType> qt = QuantTypeFromName(name);
  return qt ? Info(*qt).ggml_id : 9999;
}

nlohmann::json LoadReference() {
  std::ifstream in(std::string(TESSERA_SOURCE_DIR) + "/tests/data/quant/plan_reference.json");
  return nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
}

TEST(QuantPlan, MatchesLlamaQuantize) {
  const nlohmann::json ref = LoadReference();
  ASSERT_TRUE(ref.is_object());
  int compared = 0, fallbacks = 0, promoted = 0;
  for (const auto& model : ref["models"]) {
    for (const auto& [mix_name, tensors] : model["mixes"].items()) {
      if (tensors.is_null()) continue;  // llama-quantize refused this model
      const std::optional<QuantMix> mix = QuantMixFromName(mix_name);
      ASSERT_TRUE(mix.has_value()) << mix_name;
      std::vector<PlanTensor> in;
      for (const auto& t : tensors) {
        in.push_back({t[0].get<std::string>(), t[1].get<std::vector<uint64_t>>(),
                      TypeId(t[2].get<std::string>())});
      }
      const std::vector<PlannedType> plan =
          PlanQuantization(*mix, in, model["block_count"].get<int>());
      ASSERT_EQ(plan.size(), in.size());
      for (size_t i = 0; i < in.size(); ++i) {
        const std::string want = tensors[i][3].get<std::string>();
        EXPECT_EQ(plan[i].ggml_type, TypeId(want))
            << model["name"].get<std::string>() << " " << mix_name << " " << in[i].name
            << ": llama-quantize wrote " << want << ", plan says "
            << GgmlTypeNameOf(plan[i].ggml_type);
        ++compared;
        fallbacks += plan[i].fallback;
        promoted += plan[i].ggml_type == Info(QuantType::kQ6_K).ggml_id &&
                    *mix != QuantMix::kQ6_K;
      }
    }
  }
  // The reference exercises the interesting paths, not only the base type.
  EXPECT_GT(compared, 500);
  EXPECT_GT(fallbacks, 10);
  EXPECT_GT(promoted, 20);
}

TEST(QuantPlan, MixNames) {
  EXPECT_EQ(QuantMixFromName("q4_k_m"), QuantMix::kQ4_K_M);
  EXPECT_EQ(QuantMixFromName("Q6_K"), QuantMix::kQ6_K);
  EXPECT_EQ(QuantMixFromName("Q4_K"), std::nullopt);
  EXPECT_EQ(QuantMixName(QuantMix::kQ5_K_M), "Q5_K_M");
  EXPECT_EQ(static_cast<uint32_t>(QuantMix::kQ4_K_M), 15u);  // llama.cpp's LLAMA_FTYPE_MOSTLY_Q4_K_M
}

}  // namespace
}  // namespace tessera::quant
