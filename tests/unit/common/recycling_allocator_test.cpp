#include "common/recycling_allocator.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace pgwarden {
namespace {

struct Item {
  std::string text;
  int n = 0;
};

// Recycled in a normal build; under AddressSanitizer every block comes from the heap, whose
// quarantine keeps a freed block out of use, so a use after free is still reported there.
TEST(RecyclingAllocator, AFreedBlockIsHandedOutAgainOnTheSameThreadExceptUnderASan) {
  const void* first = nullptr;
  {
    auto a = std::allocate_shared<Item>(RecyclingAllocator<Item>{});
    a->text = "kept";
    first = a.get();
  }
  auto b = std::allocate_shared<Item>(RecyclingAllocator<Item>{});
  if (kRecycleBlocks) {
    EXPECT_EQ(b.get(), first);
  } else {
    EXPECT_NE(b.get(), first);
  }
  EXPECT_TRUE(b->text.empty());  // a fresh object, wherever it lives
  EXPECT_EQ(b->n, 0);
}

TEST(RecyclingAllocator, LiveObjectsNeverShareABlock) {
  auto a = std::allocate_shared<Item>(RecyclingAllocator<Item>{});
  auto b = std::allocate_shared<Item>(RecyclingAllocator<Item>{});
  EXPECT_NE(a.get(), b.get());
  a.reset();
  auto c = std::allocate_shared<Item>(RecyclingAllocator<Item>{});
  EXPECT_NE(c.get(), b.get());
}

TEST(RecyclingAllocator, ArraysGoToTheHeap) {
  RecyclingAllocator<Item> alloc;
  Item* many = alloc.allocate(3);
  ASSERT_NE(many, nullptr);
  alloc.deallocate(many, 3);
}

}  // namespace
}  // namespace pgwarden
