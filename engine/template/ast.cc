#include "engine/template/ast.h"

namespace tessera::tmpl {

Expr::~Expr() {
  std::vector<ExprPtr> pending;
  auto take_children = [&pending](Expr& e) {
    for (auto& a : e.args) {
      if (a) pending.push_back(std::move(a));
    }
    for (auto& kv : e.kwargs) {
      if (kv.second) pending.push_back(std::move(kv.second));
    }
  };
  take_children(*this);
  while (!pending.empty()) {
    ExprPtr e = std::move(pending.back());
    pending.pop_back();
    take_children(*e);
  }  // each `e` is freed here, childless
}

}  // namespace tessera::tmpl
