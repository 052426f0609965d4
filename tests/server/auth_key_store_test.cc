// The API key file parser, constant-time comparison and the key store's
// reload semantics.
#include "server/auth/key_store.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace tessera::server::auth {
namespace {

constexpr char kAlice[] = "alice-key-0123456789abcdef";
constexpr char kBob[] = "bob-secret-key-0123456789";

TEST(KeyFileTest, NamedUnnamedCommentsAndBlankLines) {
  const std::string text = std::string("# keys\n\n  alice : ") + kAlice + "  \r\n" + kBob +
                           "\n\t# indented comment\nci.bot-1:key:with:colons-0123456789\n";
  absl::StatusOr<std::vector<ApiKey>> keys = ParseKeyFile(text, "keys.txt");
  ASSERT_TRUE(keys.ok()) << keys.status();
  ASSERT_EQ(keys->size(), 3u);
  EXPECT_EQ((*keys)[0].name, "alice");
  EXPECT_EQ((*keys)[0].secret, kAlice);
  EXPECT_EQ((*keys)[1].name, "fp:" + Fingerprint(kBob));
  EXPECT_EQ((*keys)[1].secret, kBob);
  EXPECT_EQ((*keys)[2].name, "ci.bot-1");
  EXPECT_EQ((*keys)[2].secret, "key:with:colons-0123456789");
}

// Each bad file is refused with INVALID_ARGUMENT naming the file and line,
// and the message never holds the key.
TEST(KeyFileTest, RefusesBadFiles) {
  struct Case {
    std::string text;
    std::string message_part;
  };
  const Case cases[] = {
      {"", "holds no key"},
      {"# only comments\n\n", "holds no key"},
      {"short-key-123\n", "keys.txt:1: a key must have 16 to 512"},
      {std::string(513, 'k') + "\n", "keys.txt:1: a key must have"},
      {std::string("ok:") + kAlice + "\nbad name:" + kBob + "\n", "keys.txt:2: a key name may only"},
      {std::string(":") + kAlice + "\n", "keys.txt:1: a key name must have 1 to 64"},
      {std::string(65, 'n') + ":" + kAlice + "\n", "a key name must have 1 to 64"},
      {"alice:\n", "keys.txt:1: a key must have"},
      {"alice:key with spaces 0123456789\n", "keys.txt:1: a key may only have printable"},
      {std::string("a:") + kAlice + "\na:" + kBob + "\n", "keys.txt:2: the key name 'a' repeats"},
      {std::string("a:") + kAlice + "\nb:" + kAlice + "\n", "keys.txt:2: this key repeats"},
      {std::string(kAlice) + "\x01\n", "keys.txt:1: control character"},
      {std::string("a:") + kAlice + "\xc3\xa9\n", "keys.txt:1: a key may only have printable"},
      {std::string(kMaxKeyFileBytes + 1, '#'), "at most 1048576 bytes"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<std::vector<ApiKey>> keys = ParseKeyFile(c.text, "keys.txt");
    ASSERT_FALSE(keys.ok()) << c.text.substr(0, 80);
    EXPECT_EQ(keys.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(keys.status().message().find(c.message_part), absl::string_view::npos)
        << keys.status() << " for " << c.text.substr(0, 80);
    EXPECT_EQ(keys.status().message().find(kAlice), absl::string_view::npos);
    EXPECT_EQ(keys.status().message().find(kBob), absl::string_view::npos);
  }
}

TEST(KeyFileTest, MissingFileIsNotFound) {
  absl::StatusOr<std::vector<ApiKey>> keys = ReadKeyFile("/nonexistent/tessera-keys.txt");
  ASSERT_FALSE(keys.ok());
  EXPECT_EQ(keys.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(keys.status().message().find("/nonexistent/tessera-keys.txt"), absl::string_view::npos);
}

TEST(ConstantTimeEqualsTest, ComparesWholeStrings) {
  EXPECT_TRUE(ConstantTimeEquals(kAlice, kAlice));
  EXPECT_FALSE(ConstantTimeEquals("", kAlice));
  EXPECT_FALSE(ConstantTimeEquals(kAlice, ""));
  EXPECT_TRUE(ConstantTimeEquals("", ""));
  const std::string alice = kAlice;
  EXPECT_FALSE(ConstantTimeEquals(alice.substr(0, alice.size() - 1), alice));  // a prefix
  EXPECT_FALSE(ConstantTimeEquals(alice + "x", alice));                       // longer
  EXPECT_FALSE(ConstantTimeEquals(alice + alice, alice));  // wraps onto itself
  for (size_t i = 0; i < alice.size(); ++i) {
    std::string other = alice;
    other[i] ^= 0x01;
    EXPECT_FALSE(ConstantTimeEquals(other, alice)) << i;
  }
}

TEST(FingerprintTest, StableShortAndDistinct) {
  EXPECT_EQ(Fingerprint(kAlice), Fingerprint(kAlice));
  EXPECT_EQ(Fingerprint(kAlice).size(), 8u);
  EXPECT_NE(Fingerprint(kAlice), Fingerprint(kBob));
  // FNV-1a 64 of "a" is 0xaf63dc4c8601ec8c (the published test vector),
  // folded to 32 bits: 0xaf63dc4c ^ 0x8601ec8c.
  EXPECT_EQ(Fingerprint("a"), "296230c0");
}

class KeyStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char name[] = "/tmp/tessera-keys-XXXXXX";
    const int fd = mkstemp(name);
    ASSERT_GE(fd, 0);
    close(fd);
    path_ = name;
  }
  void TearDown() override { std::remove(path_.c_str()); }
  void Write(const std::string& text) {
    std::ofstream out(path_, std::ios::binary | std::ios::trunc);
    out << text;
  }
  std::string path_;
};

TEST_F(KeyStoreTest, FindsByKeyAndReloads) {
  Write(std::string("alice:") + kAlice + "\n");
  absl::StatusOr<std::shared_ptr<KeyStore>> store = KeyStore::Load(path_);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->Find(kAlice), "alice");
  EXPECT_EQ((*store)->Find(kBob), std::nullopt);
  EXPECT_EQ((*store)->Find(""), std::nullopt);

  // A good file replaces the keys at once: the old key stops working.
  Write(std::string("bob:") + kBob + "\n");
  ASSERT_TRUE((*store)->Reload().ok());
  EXPECT_EQ((*store)->Find(kBob), "bob");
  EXPECT_EQ((*store)->Find(kAlice), std::nullopt);

  // A bad file (or none) keeps the keys in force.
  Write(std::string("bob:") + kBob + "\nshort\n");
  absl::Status status = (*store)->Reload();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*store)->Find(kBob), "bob");
  std::remove(path_.c_str());
  EXPECT_EQ((*store)->Reload().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ((*store)->Find(kBob), "bob");
  EXPECT_EQ((*store)->size(), 1u);
}

TEST_F(KeyStoreTest, BadFileFailsTheLoad) {
  Write("too-short\n");
  absl::StatusOr<std::shared_ptr<KeyStore>> store = KeyStore::Load(path_);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(KeyStoreWithoutFileTest, ReloadFails) {
  KeyStore store({{"a", kAlice}}, "");
  EXPECT_EQ(store.Reload().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store.Find(kAlice), "a");
}

}  // namespace
}  // namespace tessera::server::auth
