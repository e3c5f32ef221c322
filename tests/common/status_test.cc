#include "hy/common/status.h"

#include <gtest/gtest.h>

#include <iterator>
#include <memory>
#include <set>
#include <string>

#include "hy/common/result.h"

namespace hy {
namespace {

TEST(StatusTest, DefaultIsOk) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOk);
  EXPECT_EQ(s.message(), "");
  EXPECT_EQ(s.ToString(), "OK");
}

TEST(StatusTest, ErrorCarriesCodeAndMessage) {
  Status s = Status::DataLoss("chunk 7 checksum mismatch");
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(s.IsDataLoss());
  EXPECT_FALSE(s.IsNotFound());
  EXPECT_EQ(s.message(), "chunk 7 checksum mismatch");
  EXPECT_EQ(s.ToString(), "DataLoss: chunk 7 checksum mismatch");
}

TEST(StatusTest, OkCodeDropsMessage) {
  Status s(StatusCode::kOk, "ignored");
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.message(), "");
}

TEST(StatusTest, EveryCodeHasADistinctName) {
  const StatusCode codes[] = {
      StatusCode::kInvalidArgument, StatusCode::kNotFound,
      StatusCode::kAlreadyExists,   StatusCode::kFailedPrecondition,
      StatusCode::kDataLoss,        StatusCode::kIOError,
      StatusCode::kUnavailable,     StatusCode::kAborted,
      StatusCode::kInternal,        StatusCode::kResourceExhausted,
      StatusCode::kDeadlineExceeded};
  std::set<std::string_view> names;
  for (StatusCode c : codes) {
    Status s(c, "m");
    EXPECT_EQ(s.code(), c);
    EXPECT_NE(StatusCodeName(c), "Unknown");
    names.insert(StatusCodeName(c));
  }
  EXPECT_EQ(names.size(), std::size(codes));
}

TEST(StatusTest, CopyAndMoveKeepContents) {
  Status a = Status::NotFound("version 3");
  Status b = a;
  EXPECT_EQ(a, b);
  Status c = std::move(b);
  EXPECT_EQ(c.ToString(), "NotFound: version 3");
  a = Status::OK();
  EXPECT_TRUE(a.ok());
  EXPECT_NE(a, c);
}

TEST(StatusTest, WithContextPrefixesMessage) {
  EXPECT_EQ(Status::IOError("disk full").WithContext("saving v3").ToString(),
            "IOError: saving v3: disk full");
  EXPECT_TRUE(Status::OK().WithContext("x").ok());
}

Status FailIf(bool fail) {
  return fail ? Status::Aborted("stop") : Status::OK();
}

Status Chain(bool fail, int* reached) {
  HY_RETURN_IF_ERROR(FailIf(fail));
  *reached = 1;
  return Status::OK();
}

TEST(StatusTest, ReturnIfErrorPropagates) {
  int reached = 0;
  EXPECT_EQ(Chain(true, &reached).code(), StatusCode::kAborted);
  EXPECT_EQ(reached, 0);
  EXPECT_TRUE(Chain(false, &reached).ok());
  EXPECT_EQ(reached, 1);
}

Result<int> Half(int x) {
  if (x % 2) return Status::InvalidArgument("odd");
  return x / 2;
}

Result<int> Quarter(int x) {
  HY_ASSIGN_OR_RETURN(int h, Half(x));
  HY_ASSIGN_OR_RETURN(h, Half(h));
  return h;
}

TEST(ResultTest, ValueAndError) {
  Result<int> r = Half(8);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 4);
  EXPECT_TRUE(r.status().ok());
  Result<int> e = Half(3);
  EXPECT_FALSE(e.ok());
  EXPECT_TRUE(e.status().IsInvalidArgument());
  EXPECT_EQ(e.value_or(-1), -1);
}

TEST(ResultTest, AssignOrReturnPropagates) {
  EXPECT_EQ(*Quarter(12), 3);
  EXPECT_EQ(Quarter(6).status().message(), "odd");
  EXPECT_EQ(Quarter(5).status().message(), "odd");
}

TEST(ResultTest, OkStatusWithoutValueIsInternal) {
  Result<int> r{Status::OK()};
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
}

TEST(ResultTest, HoldsMoveOnlyValues) {
  Result<std::unique_ptr<int>> r(std::make_unique<int>(7));
  ASSERT_TRUE(r.ok());
  std::unique_ptr<int> p = std::move(r).value();
  EXPECT_EQ(*p, 7);
}

TEST(ResultDeathTest, ValueOfErrorAborts) {
  Result<int> e = Half(1);
  EXPECT_DEATH((void)e.value(), "value\\(\\) of a Result holding");
}

}  // namespace
}  // namespace hy
