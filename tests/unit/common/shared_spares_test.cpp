#include "common/shared_spares.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

namespace pgwarden {
namespace {

struct Spare {
  std::string text;
  std::vector<int> numbers;
};

TEST(SharedSpares, AnObjectNoOneHoldsIsHandedOutAgainExceptUnderASan) {
  SharedSpares<Spare> spares;
  const Spare* first = nullptr;
  {
    auto a = spares.take();
    a->text = "a text longer than the small-string buffer";
    first = a.get();
  }
  auto b = spares.take();
  if (kRecycleBlocks) {
    EXPECT_EQ(b.get(), first);
    // As it was left: the caller refills it.
    EXPECT_EQ(b->text, "a text longer than the small-string buffer");
  } else {
    EXPECT_NE(b.get(), first);
    EXPECT_TRUE(b->text.empty());
  }
}

TEST(SharedSpares, AnObjectStillHeldIsNeverHandedOut) {
  SharedSpares<Spare, 2> spares;
  auto a = spares.take();
  auto b = spares.take();
  auto c = spares.take();  // both kept ones are held: a new one, kept in place of the oldest
  EXPECT_NE(a.get(), b.get());
  EXPECT_NE(b.get(), c.get());
  EXPECT_NE(a.get(), c.get());
  a->text = "still read by its holder";
  const Spare* held_b = b.get();
  b.reset();
  auto d = spares.take();
  if (kRecycleBlocks) {
    EXPECT_EQ(d.get(), held_b);
  }
  EXPECT_NE(d.get(), a.get());
  EXPECT_NE(d.get(), c.get());
  EXPECT_EQ(a->text, "still read by its holder");
}

TEST(SharedSpares, RefilledStorageIsReusedByCopyAssignment) {
  SharedSpares<Spare> spares;
  const Spare source{"a text longer than the small-string buffer", {1, 2, 3, 4}};
  const char* text_storage = nullptr;
  const int* numbers_storage = nullptr;
  {
    auto a = spares.take();
    *a = source;
    text_storage = a->text.data();
    numbers_storage = a->numbers.data();
  }
  auto b = spares.take();
  *b = source;
  EXPECT_EQ(b->text, source.text);
  EXPECT_EQ(b->numbers, source.numbers);
  if (kRecycleBlocks) {
    EXPECT_EQ(b->text.data(), text_storage);
    EXPECT_EQ(b->numbers.data(), numbers_storage);
  }
}

TEST(SharedSpares, AMarkStaysWithItsObjectAndANewObjectsMarkIsZero) {
  SharedSpares<Spare, 2> spares;
  uint64_t* mark = nullptr;
  const Spare* first = nullptr;
  {
    auto a = spares.take(&mark);
    ASSERT_NE(mark, nullptr);
    EXPECT_EQ(*mark, 0u);
    *mark = 7;
    first = a.get();
  }
  uint64_t* again = nullptr;
  auto b = spares.take(&again);
  if (kRecycleBlocks) {
    EXPECT_EQ(b.get(), first);
    EXPECT_EQ(*again, 7u);  // the same object: what its last filler left
  } else {
    EXPECT_EQ(*again, 0u);
  }
  // Both kept objects held: a new one replaces the oldest slot, and its mark starts at 0.
  auto c = spares.take(&mark);
  *mark = 9;
  auto d = spares.take(&mark);
  EXPECT_EQ(*mark, 0u);
  spares.clear();
  auto e = spares.take(&mark);
  EXPECT_EQ(*mark, 0u);
}

TEST(SharedSpares, ClearLetsGoButHoldersKeepTheirObject) {
  SharedSpares<Spare> spares;
  auto a = spares.take();
  a->text = "kept by its holder";
  spares.clear();
  EXPECT_EQ(a.use_count(), 1);
  EXPECT_EQ(a->text, "kept by its holder");
  auto b = spares.take();
  EXPECT_NE(b.get(), a.get());
}

}  // namespace
}  // namespace pgwarden
