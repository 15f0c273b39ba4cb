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

TEST(RecyclingAllocator, AFreedBlockIsHandedOutAgainOnTheSameThread) {
  const void* first = nullptr;
  {
    auto a = std::allocate_shared<Item>(RecyclingAllocator<Item>{});
    a->text = "kept";
    first = a.get();
  }
  auto b = std::allocate_shared<Item>(RecyclingAllocator<Item>{});
  if (!kRecycleBlocks) GTEST_SKIP() << "blocks are not recycled under AddressSanitizer";
  EXPECT_EQ(b.get(), first);
  EXPECT_TRUE(b->text.empty());  // a fresh object in the old block
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
