// Tests of the indexer.prolog reference (spec v32 §2.1-§2.6): hand-worked cases, properties, an independent
// numpy/ml_dtypes implementation (generator script at the end of this file), thread invariance, NaN/inf.
#include <doctest/doctest.h>

#include "ref_test_util.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "numerics/formats.hpp"
#include "numerics/hadamard.hpp"
#include "numerics/layernorm.hpp"
#include "numerics/rope.hpp"
#include "stage/stage.hpp"

using namespace dsa;

namespace {

// The generator shared with the Python script: 64-bit LCG, 31-bit outputs, symmetric integers.
struct Lcg {
  std::uint64_t s;
  std::uint64_t next() {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return s >> 33;
  }
  int sym(int m) { return static_cast<int>(next() % static_cast<std::uint64_t>(2 * m + 1)) - m; }
};

std::uint16_t bf(double x) { return num::f32_to_bf16(static_cast<float>(x)); }

// A prolog case with LCG inputs (same order as the Python generator: q, k, w, ln_weight, ln_bias).
Case make_case(std::int64_t T, std::int64_t H, std::int64_t Dh, std::uint64_t seed) {
  Case c;
  c.name = "prolog";
  c.stage = "indexer.prolog";
  Lcg g{seed};
  Tensor q(DType::bf16, {T, H, Dh}), k(DType::bf16, {T, Dh}), w(DType::f32, {T, H});
  Tensor lw(DType::f32, {Dh}), lb(DType::f32, {Dh});
  for (auto& v : q.span<std::uint16_t>()) v = bf(g.sym(1000) / 256.0);
  for (auto& v : k.span<std::uint16_t>()) v = bf(g.sym(1000) / 256.0);
  for (auto& v : w.span<float>()) v = static_cast<float>(g.sym(1000) / 64.0);
  for (auto& v : lw.span<float>()) v = static_cast<float>(1 + g.sym(100) / 512.0);
  for (auto& v : lb.span<float>()) v = static_cast<float>(g.sym(100) / 1024.0);
  c.inputs = {{"q", q}, {"k", k}, {"w", w}, {"ln_weight", lw}, {"ln_bias", lb}};
  return c;
}

// cos/sin from Pythagorean triples (exactly the Python generator's table).
void add_triple_table(Case& c, std::int64_t T, std::int64_t half) {
  const int tr[8][3] = {{3, 4, 5}, {5, 12, 13}, {8, 15, 17}, {7, 24, 25}, {20, 21, 29}, {12, 35, 37}, {9, 40, 41}, {28, 45, 53}};
  Tensor cs(DType::f32, {T, half}), sn(DType::f32, {T, half});
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t i = 0; i < half; ++i) {
      const auto& p = tr[(t * 7 + i) % 8];
      const float sa = (t + i) % 3 == 0 ? -1.0f : 1.0f;
      cs.data<float>()[t * half + i] = static_cast<float>(p[0]) / static_cast<float>(p[2]) * sa;
      sn.data<float>()[t * half + i] = static_cast<float>(p[1]) / static_cast<float>(p[2]);
    }
  c.inputs["cos"] = cs;
  c.inputs["sin"] = sn;
}

void add_table(Case& c, std::int64_t T, std::int64_t half, float cv, float sv) {
  Tensor cs(DType::f32, {T, half}), sn(DType::f32, {T, half});
  for (auto& v : cs.span<float>()) v = cv;
  for (auto& v : sn.span<float>()) v = sv;
  c.inputs["cos"] = cs;
  c.inputs["sin"] = sn;
}

Expected run(Case c, int threads = 1) { return test::run_reference(std::move(c), threads); }

const Tensor& out(const Expected& e, const char* name) {
  const RefTensor* r = e.find(name);
  REQUIRE(r != nullptr);
  return r->value;
}

std::vector<std::uint8_t> unhex(const char* s) {
  std::vector<std::uint8_t> v;
  for (std::size_t i = 0; s[i] && s[i + 1]; i += 2) v.push_back(static_cast<std::uint8_t>(std::stoi(std::string(s + i, 2), nullptr, 16)));
  return v;
}

float bfv(std::uint16_t b) { return num::bf16_to_f32(b); }

// Expected values from the numpy/ml_dtypes generator at the end of this file (python3 gen.py).
// case A
const char* kA_q_fp8 = "646463ec62686654e0f4747873ef5c66746e7171ebecf24df4f1ec78e0f5e7eaf8c56476f957e372766a6078726fe0f05d66f46c655e62e9ef59f277e36e6a64f47875f45ae4f17062726b726769eaf06ae46a7460795a617de566f76af9766bf570ebf1687266e8e27b48eb7873e6f4ddfdf454e5da6c75f975775e715fe8ecd368d7fd62dce8f5ee66d973ebdd6ef8e254e9ea6572f0e86d7459d9645deb6decf26f72f378ea436e696ef477706a745f70ecf3f8eff2f07476616077cf4bf5616be2dbeff5766377f1ebe9f16c54e36df862f46bf869d672536b7063cb6d70dfe46e6fe46d68f2ec6e5d787370f1d27a687872e4de62ef6b5fe4f7ec6f77f6ed6cee6bd6e25f65f1567af56ff1e67467606afaf3766d7173f279f3616d63d6de71f0f2d1e86264f472ec717475f073f4705ff8f1f26d6964f3eb70d4f4e440766d78ef6b6e72e9e765f673e661eb6cecedea6d6976faedf27275f06ed4f3f070fc60ed6c69e668f06d7c77e6657871716f587369f374746eefefd77771e272ed6d50db727773e46ad572726574cd71d474e66aedf06e71ee7ad4f3687356f6f9717272faf35ae5fa6e6bdb7a706c7571f06aebee706a74ead2f9ee776d5e726af4f762d14a62d66ce6ebe26862ee6162f177e6e2f372e266576e766c78f94df8f2f077726aeaf46d7268eac074735e6572ede071e5e2f1dd71775c73ede0e8";
const char* kA_k_fp8 = "e263ebe6efe1f3ede672634fe8ea616c776173c76d626ce9e6d869db7159f0fb70eb6e3cdfe050f4c2454670f4ea5ae8757375e2f4d1f9c0e86a6bf0f4d967796161f6737bea75ede7f3edc96df5da6e726e71ede9f0f177e1e36dda66ea69f3e96f5eef68f359e5e8e87652ddefc5e4f66979f0f0f56f736e676c616eca7b6ae650f562746eecef6970ef74685e6dd7676e5bde6af079f472e5d373f4785b6ee8616974f3f7e1746b78e1f27264efe9d0eaec6373f0ac62edde655a71f576eb75e6706af3f377e85b65ea76f1cf6ff2cbf0ec54eee65e6ff9eb787572decd6ef4ede46aed7476e5df646956e4f3596172f5f5e5bce3f1693df8685c466679f0";
const std::vector<float> kA_q_scale = {0x1.0000000000000p-6, 0x1.0000000000000p-6, 0x1.0000000000000p-6, 0x1.0000000000000p-6};
const std::vector<float> kA_k_scale = {0x1.0000000000000p-7, 0x1.0000000000000p-7};
const std::vector<float> kA_weights = {0x1.42164e0000000p-6, -0x1.607e240000000p-6, -0x1.4b478e0000000p-6, 0x1.207fe40000000p-10};
// case B
const char* kB_q_fp8 = "f4edf078dbf7f879ef7c7b78f3f9e27e7a79fd5e7961e3fa7debe17c6e79faf577fa597cfa70fb6e7c7c6ee372f8547bfbe67d79faf27c786efaf874fdfa7979f17d717dfc6e7851f47d72e567e87a5470fb7a6d6a766ee0ecfcf650fbf37b7bf6fdf67273ebf6747061f870f3fafce579f9fcef646cfb77f9f774e9f9625fedfb69e979f379f57b71fefb6366f9dcfb5bf9f176fdde6af8e07d7b7df164effb76766ff6f7f7f9fa77726c727cfd79717a796952f97dca6b7ef37b69f2ebf27afaebf2eaeb6c787674fdfb717b7afdfb6df4edf064766cfdc3fcf5e976fc7c7974fc77f8fdf3f0f37d7dfd70f7eff36ae96e7a797dfbf378e9e3d5fc7d71786d7e72f7d1f97ad3ed72e9fc66f879e457fa7afa6beeeb74e8e56dfbf7f77e726bf6786769f972e172fccb6873f2cd7a71744971777b5e7cf4796fe877faf36bfafaf277754dd96b7174e97b7a756776e17361fbf37974f8dd75ccf7697979747bf4ddf7edf5e97cee666cf8f8f96964f2fa61f97b6759e372f776f77af9e572767af373e8f7f873f5f9e47af7fbf378797af0f97a7e5b70fc776af85ef8f846f67576e2f5ef56fc74f7f96df378e9717cf17a49faf975e6f9ee6770fad7ebf9fb7366f27069f3f1f247d9f5f17bfaf1f8795e6af0e8fb79ee62606afaf4da776af8767873796c72e9737af9cbf9f3f77b756a79f5e878507bf9f5f8ebf7717b71f079f3f7f8f27ef8d2fb72f6e2dc6c7cfcf0f9787a7973fafdf7fc64767af9607d69edfaf9f0e5f75b78787af2e9f3fafafd6a7d74f26f707d5c31e0e8fef9fbfbfa6cfcf2796a7dfcdffa6271737971ed65fd62fe73797ce876fefcf572fafbfc78fb6df86ef1717c7a706c7cee6bfa79df71ea72667d7878fb7b7977fdde737959636c59e3f2ecf4fb79f9faf0f1f3ef6b7af852e278ebfef5f3e0f1797cf26c7d7b70f26ae66a75ece77975f3f16af7fddaf4e7f2727a647aec79f8e66df57878f0f67cfc7c79f473f9eaf661fcfbfa6bf36ff5ec79ef7a68ebf7557578e55b6ee769f4eaf9f4e3f87579795ffcf677fbfaf47b7a7bfd6c797475f2f8f972";
const char* kB_k_fp8 = "6a7afe6ef162f8e5f2f87b7973f1687e73e4787a7be2f3dbdef474786c70766ae17573e8784beceb707b72fa79f8e3e8ec77fbfbeef96c7279f8fd51f6fac574e5edf57975fcc1ebf2f96570faf6f5f3f279ec68f2f868faf2ece67d7d7df0e3707778fa79dde975fa71f67af6f9f35e7b79f8f76e72f97bf4e969faef6d6e6478e1655bc4717a6bee616dfb78f4f6777972f2fdf1e974666ef6f472717b70ec7df5766d607c79e560d6f269f3f777737bfa747962f96ce9587272747363f96270f6f7e471f5e7f26def7978f97663fafd73757c6678f9f5f56ffa7ecb75f7eafaeff96ddc6f7a72525ff153e87addfcf473f879e3f97d697562f47ef47c6a6a7bf27d7871edf8e0f2636b7877e4defb6d6a5efbf6f36a74f460727b786c5d7b77f47e73f9d9737973f0edf5686df169797362747bcef5d6657174eb7af6ef7b6bed6e707777f4f778e2f27870f2f9f478fdf9fde46fe6736cf5f8f8f371f9f7fd7179eb767ae2effbe875ee5df5dc79deeff9f77877ec714b7b6e79f6faeded";
const std::vector<float> kB_q_scale = {0x1.2924920000000p-7, 0x1.1800000000000p-7, 0x1.4924920000000p-7, 0x1.5249240000000p-7, 0x1.26db6e0000000p-7, 0x1.3b6db60000000p-7};
const std::vector<float> kB_k_scale = {0x1.2924920000000p-8, 0x1.3924920000000p-8, 0x1.3924920000000p-8};
const std::vector<float> kB_weights = {-0x1.89f5a00000000p-13, -0x1.0b98800000000p-7, 0x1.5d1bd60000000p-8, 0x1.6bf2000000000p-7, -0x1.82731c0000000p-7, -0x1.bc57400000000p-8};

}  // namespace

TEST_CASE("ref.prolog hadamard of a unit vector: +-128^-0.5 by popcount sign") {
  CHECK(num::f32_bits(num::hadamard_scale_f32(128)) == 0x3DB504F3u);
  std::vector<float> x(128, 0.0f);
  x[5] = 1.0f;
  num::hadamard_bf16(x.data(), 128);
  for (int i = 0; i < 128; ++i) {
    const bool neg = __builtin_popcount(static_cast<unsigned>(i & 5)) % 2 == 1;
    // bf16(0x3DB504F3) = 0x3DB5 (the dropped half 0x04F3 < 0x8000)
    CHECK(num::f32_to_bf16(x[static_cast<std::size_t>(i)]) == (neg ? 0xBDB5 : 0x3DB5));
  }
}

TEST_CASE("ref.prolog hadamard equals the Sylvester matrix product on exact inputs - involution") {
  Lcg g{42};
  std::vector<float> x(128), y(128), xx(128);
  for (auto& v : x) v = static_cast<float>(g.sym(8));
  y = x;
  num::hadamard_bf16(y.data(), 128);
  const double sc = static_cast<double>(num::f32_from_bits(0x3DB504F3u));
  for (int j = 0; j < 128; ++j) {
    long sum = 0;
    for (int i = 0; i < 128; ++i) sum += (__builtin_popcount(static_cast<unsigned>(i & j)) % 2 ? -1 : 1) * static_cast<long>(x[static_cast<std::size_t>(i)]);
    const float prod = static_cast<float>(static_cast<double>(sum) * sc);  // exact in double, one fp32 rounding
    CHECK(num::f32_to_bf16(y[static_cast<std::size_t>(j)]) == num::f32_to_bf16(prod));
  }
  // Unnormalised FWHT twice = 128 x exactly (integer data: every fp32 sum is exact).
  xx = x;
  num::fwht_f32(xx.data(), 128);
  num::fwht_f32(xx.data(), 128);
  for (int i = 0; i < 128; ++i) CHECK(xx[static_cast<std::size_t>(i)] == 128.0f * x[static_cast<std::size_t>(i)]);
  // Normalised transform twice on random bf16 data: back to x within two bf16 roundings (L2).
  std::vector<float> r(128), rr;
  for (auto& v : r) v = bfv(bf(g.sym(1000) / 97.0));
  rr = r;
  num::hadamard_bf16(rr.data(), 128);
  num::hadamard_bf16(rr.data(), 128);
  double err = 0, nrm = 0;
  for (int i = 0; i < 128; ++i) {
    const double d = static_cast<double>(rr[static_cast<std::size_t>(i)]) - r[static_cast<std::size_t>(i)];
    err += d * d;
    nrm += static_cast<double>(r[static_cast<std::size_t>(i)]) * r[static_cast<std::size_t>(i)];
  }
  CHECK(std::sqrt(err) <= std::ldexp(1.0, -8) * 1.01 * std::sqrt(nrm));
  CHECK(err > 0.0);  // the bf16 roundings are visible: the check above is not vacuous
}

TEST_CASE("ref.prolog layernorm of 3 +- 0.5 with eps 0: mean 3, rstd 2, y = +-w + b") {
  Case c = make_case(1, 1, 128, 1);
  Tensor k(DType::bf16, {1, 128}), lw(DType::f32, {128}), lb(DType::f32, {128});
  for (int i = 0; i < 128; ++i) {
    k.data<std::uint16_t>()[i] = bf(i % 2 ? 2.5 : 3.5);
    lw.data<float>()[i] = 1.0f + static_cast<float>(i) / 128.0f;
    lb.data<float>()[i] = static_cast<float>(i) / 256.0f - 0.25f;
  }
  c.inputs["k"] = k;
  c.inputs["ln_weight"] = lw;
  c.inputs["ln_bias"] = lb;
  c.attrs["ln_eps"] = 0.0;
  c.attrs["hadamard"] = std::int64_t{0};
  add_table(c, 1, 32, 1.0f, 0.0f);
  const Expected e = run(c);
  const Tensor& kn = out(e, "k_norm");
  for (int i = 0; i < 128; ++i) {
    const double s = i % 2 ? -1.0 : 1.0;
    const double want = s * (1.0 + i / 128.0) + (i / 256.0 - 0.25);  // exact in double
    CHECK(kn.data<std::uint16_t>()[i] == num::f64_to_bf16(want));
  }
  // cos 1 / sin 0 and no Hadamard: k_rope and k_rot are k_norm itself.
  CHECK(out(e, "k_rope").same_bytes(kn));
  CHECK(out(e, "k_rot").same_bytes(kn));
}

TEST_CASE("ref.prolog layernorm of random rows is within a few fp32 ulps of the exact value") {
  Lcg g{7};
  std::vector<float> x(128), w(128), b(128), y(128);
  for (int rep = 0; rep < 20; ++rep) {
    for (auto& v : x) v = bfv(bf(g.sym(30000) / 1024.0 + rep));
    for (auto& v : w) v = static_cast<float>(1 + g.sym(100) / 512.0);
    for (auto& v : b) v = static_cast<float>(g.sym(100) / 1024.0);
    num::layer_norm_f32(x.data(), 128, w.data(), b.data(), 1e-6f, y.data());
    long double m = 0, v2 = 0;
    for (float xi : x) m += xi;
    m /= 128;
    for (float xi : x) v2 += (xi - m) * (xi - m);
    v2 /= 128;
    const long double rstd = 1.0L / std::sqrt(v2 + static_cast<long double>(1e-6f));
    for (int i = 0; i < 128; ++i) {
      const long double nrm = (x[static_cast<std::size_t>(i)] - m) * rstd;
      const long double want = w[static_cast<std::size_t>(i)] * nrm + b[static_cast<std::size_t>(i)];
      const long double mag = std::fabs(w[static_cast<std::size_t>(i)] * nrm) + std::fabs(b[static_cast<std::size_t>(i)]);
      CHECK(std::fabs(static_cast<long double>(y[static_cast<std::size_t>(i)]) - want) <= std::ldexp(4.0L, -24) * mag);
    }
  }
}

TEST_CASE("ref.prolog rope of a 90 degree table: neox and interleaved pairings - identity table") {
  for (const char* layout : {"neox", "interleaved"}) {
    CAPTURE(layout);
    Case c = make_case(2, 3, 128, 99);
    c.attrs["rope_layout"] = std::string(layout);
    c.attrs["hadamard"] = std::int64_t{0};
    add_table(c, 2, 32, 0.0f, 1.0f);  // out_a = -x_b, out_b = x_a
    const Expected e = run(c);
    const Tensor& qr = out(e, "q_rope");
    const Tensor& q = c.inputs["q"];
    const bool neox = std::string(layout) == "neox";
    for (std::int64_t row = 0; row < 6; ++row) {
      const std::uint16_t* in = q.data<std::uint16_t>() + row * 128;
      const std::uint16_t* o = qr.data<std::uint16_t>() + row * 128;
      for (int i = 0; i < 32; ++i) {
        const int a = neox ? i : 2 * i, b = neox ? i + 32 : 2 * i + 1;
        CHECK(bfv(o[a]) == -bfv(in[b]));
        CHECK(bfv(o[b]) == bfv(in[a]));
      }
      for (int d = 64; d < 128; ++d) CHECK(o[d] == in[d]);  // nope half untouched
    }
  }
  Case c = make_case(2, 3, 128, 99);
  c.attrs["hadamard"] = std::int64_t{0};
  add_table(c, 2, 32, 1.0f, 0.0f);
  const Expected e = run(c);
  CHECK(out(e, "q_rope").same_bytes(c.inputs["q"]));
  CHECK(out(e, "q_rot").same_bytes(c.inputs["q"]));
}

TEST_CASE("ref.prolog rope preserves each pair's norm within bf16 rounding") {
  Case c = make_case(3, 4, 128, 5);
  c.attrs["hadamard"] = std::int64_t{0};
  add_triple_table(c, 3, 32);
  const Expected e = run(c);
  const Tensor& qr = out(e, "q_rope");
  const Tensor& q = c.inputs["q"];
  int rotated = 0;
  for (std::int64_t row = 0; row < 12; ++row)
    for (int i = 0; i < 32; ++i) {
      const double a0 = bfv(q.data<std::uint16_t>()[row * 128 + i]), b0 = bfv(q.data<std::uint16_t>()[row * 128 + i + 32]);
      const double a1 = bfv(qr.data<std::uint16_t>()[row * 128 + i]), b1 = bfv(qr.data<std::uint16_t>()[row * 128 + i + 32]);
      const double n0 = std::hypot(a0, b0), n1 = std::hypot(a1, b1);
      CHECK(std::fabs(n1 - n0) <= std::ldexp(1.0, -8) * n0 + 1e-30);
      rotated += (a1 != a0 || b1 != b0);
    }
  CHECK(rotated > 300);  // the table really rotates
}

TEST_CASE("ref.prolog yarn frequency table: unscaled below low=10, divided by 40 above high=23") {
  num::YarnParams p;  // V3.2 defaults
  const auto f = num::yarn_inv_freqs(p);
  p.max_seq_len = 4096;  // no YaRN
  const auto f0 = num::yarn_inv_freqs(p);
  REQUIRE(f.size() == 32);
  CHECK(f0[0] == 1.0f);
  for (int i = 0; i < 32; ++i) {
    const double exact = std::pow(10000.0, -i / 32.0);
    CHECK(std::fabs(f0[static_cast<std::size_t>(i)] - exact) <= std::ldexp(1.0, -22) * exact);
    if (i <= 10) CHECK(f[static_cast<std::size_t>(i)] == f0[static_cast<std::size_t>(i)]);
    if (i >= 23) CHECK(f[static_cast<std::size_t>(i)] == f0[static_cast<std::size_t>(i)] / 40.0f);
    if (i > 10 && i < 23) {
      const double r = (i - 10) / 13.0, want = exact / 40 * r + exact * (1 - r);
      CHECK(std::fabs(f[static_cast<std::size_t>(i)] - want) <= 1e-6 * want);
    }
  }
}

TEST_CASE("ref.prolog hand-worked act_quant and weights: 2*e0 through Hadamard") {
  Case c = make_case(1, 2, 128, 3);
  Tensor q(DType::bf16, {1, 2, 128}), w(DType::f32, {1, 2});
  q.data<std::uint16_t>()[0] = bf(2.0);  // head 0: 2 e0
  for (int i = 0; i < 128; ++i) q.data<std::uint16_t>()[128 + i] = bf(i == 0 ? 3.0 : 1.0);  // head 1 (no Hadamard run below)
  w.data<float>()[0] = 1.5f;
  w.data<float>()[1] = -0.75f;
  c.inputs["q"] = q;
  c.inputs["w"] = w;
  add_table(c, 1, 32, 1.0f, 0.0f);
  {
    const Expected e = run(c);
    // FWHT(2 e0) = 2 everywhere; fl32(2 * 0x3DB504F3) = 0x3E3504F3 -> bf16 0x3E35 = 0.1767578125.
    for (int i = 0; i < 128; ++i) CHECK(out(e, "q_rot").data<std::uint16_t>()[i] == 0x3E35);
    // amax 0.1767578125 * fl32(1/448) = 3.9455e-4 -> ceil(log2) = -11 -> s = 2^-11; 362.0 -> e4m3 352 = 0x7B.
    CHECK(out(e, "q_scale").data<float>()[0] == std::ldexp(1.0f, -11));
    for (int i = 0; i < 128; ++i) CHECK(out(e, "q_fp8").data<std::uint8_t>()[i] == 0x7B);
    const float sc = num::f32_from_bits(0x3DB504F3u);
    CHECK(out(e, "weights").data<float>()[0] == static_cast<float>(1.5 * std::ldexp(1.0, -11) * static_cast<double>(sc)));
  }
  c.attrs["hadamard"] = std::int64_t{0};
  const Expected e = run(c);
  // head 1: amax 3 -> 3 * fl32(1/448) = 0.0066964 -> s = 2^-7; 1 -> 128 = 0x70, 3 -> 384 = 0x7C.
  CHECK(out(e, "q_scale").data<float>()[1] == std::ldexp(1.0f, -7));
  for (int i = 0; i < 128; ++i) CHECK(out(e, "q_fp8").data<std::uint8_t>()[128 + i] == (i == 0 ? 0x7C : 0x70));
  const float sc = num::f32_from_bits(0x3DB504F3u);
  CHECK(out(e, "weights").data<float>()[1] == static_cast<float>(-0.75 * std::ldexp(1.0, -7) * static_cast<double>(sc)));
}

TEST_CASE("ref.prolog matches an independent numpy/ml_dtypes implementation (table and YaRN positions)") {
  SUBCASE("A: neox, Hadamard, ue8m0, Pythagorean cos/sin table") {
    Case c = make_case(2, 2, 128, 12345);
    add_triple_table(c, 2, 32);
    const Expected e = run(c);
    CHECK(std::vector<std::uint8_t>(out(e, "q_fp8").data<std::uint8_t>(), out(e, "q_fp8").data<std::uint8_t>() + 512) == unhex(kA_q_fp8));
    CHECK(std::vector<std::uint8_t>(out(e, "k_fp8").data<std::uint8_t>(), out(e, "k_fp8").data<std::uint8_t>() + 256) == unhex(kA_k_fp8));
    for (std::size_t i = 0; i < kA_q_scale.size(); ++i) CHECK(out(e, "q_scale").data<float>()[i] == kA_q_scale[i]);
    for (std::size_t i = 0; i < kA_k_scale.size(); ++i) CHECK(out(e, "k_scale").data<float>()[i] == kA_k_scale[i]);
    for (std::size_t i = 0; i < kA_weights.size(); ++i) CHECK(out(e, "weights").data<float>()[i] == kA_weights[i]);
  }
  SUBCASE("B: interleaved, no Hadamard, fp32_div scales, YaRN table from positions") {
    Case c = make_case(3, 2, 128, 777);
    c.attrs["rope_layout"] = std::string("interleaved");
    c.attrs["hadamard"] = std::int64_t{0};
    c.attrs["scale_fmt"] = std::string("fp32_div");
    c.inputs["positions"] = Tensor::from_vector(DType::i64, {3}, std::vector<std::int64_t>{5, 16383, 70000});
    const Expected e = run(c);
    CHECK(std::vector<std::uint8_t>(out(e, "q_fp8").data<std::uint8_t>(), out(e, "q_fp8").data<std::uint8_t>() + 768) == unhex(kB_q_fp8));
    CHECK(std::vector<std::uint8_t>(out(e, "k_fp8").data<std::uint8_t>(), out(e, "k_fp8").data<std::uint8_t>() + 384) == unhex(kB_k_fp8));
    for (std::size_t i = 0; i < kB_q_scale.size(); ++i) CHECK(out(e, "q_scale").data<float>()[i] == kB_q_scale[i]);
    for (std::size_t i = 0; i < kB_k_scale.size(); ++i) CHECK(out(e, "k_scale").data<float>()[i] == kB_k_scale[i]);
    for (std::size_t i = 0; i < kB_weights.size(); ++i) CHECK(out(e, "weights").data<float>()[i] == kB_weights[i]);
  }
}

TEST_CASE("ref.prolog thread invariance: 1, 2 and 16 threads give identical bytes") {
  Case c = make_case(9, 3, 128, 2024);
  std::vector<std::int32_t> pos(9);
  for (int t = 0; t < 9; ++t) pos[static_cast<std::size_t>(t)] = 1000 * t + 7;
  c.inputs["positions"] = Tensor::from_vector(DType::i32, {9}, pos);
  const Expected e1 = run(c, 1), e2 = run(c, 2), e16 = run(c, 16);
  for (const auto& r : e1.tensors) {
    CAPTURE(r.name);
    CHECK(r.value.same_bytes(e2.find(r.name)->value));
    CHECK(r.value.same_bytes(e16.find(r.name)->value));
  }
}

TEST_CASE("ref.prolog NaN and inf inputs propagate to their own token/head only") {
  Case c = make_case(2, 2, 128, 11);
  add_triple_table(c, 2, 32);
  const Expected clean = run(c);
  c.inputs["k"] = c.inputs["k"].clone();
  c.inputs["q"] = c.inputs["q"].clone();
  c.inputs["k"].data<std::uint16_t>()[3] = 0x7FC0;               // k token 0 dim 3 = NaN
  c.inputs["q"].data<std::uint16_t>()[(1 * 2 + 0) * 128 + 5] = 0x7F80;  // q token 1 head 0 dim 5 = +inf
  const Expected e = run(c, 2);
  for (int i = 0; i < 128; ++i) CHECK(std::isnan(bfv(out(e, "k_norm").data<std::uint16_t>()[i])));
  CHECK(std::isnan(out(e, "k_scale").data<float>()[0]));
  CHECK(out(e, "k_scale").data<float>()[1] == out(clean, "k_scale").data<float>()[1]);
  CHECK(!std::isfinite(out(e, "q_scale").data<float>()[2]));
  for (int row : {0, 1, 3}) CHECK(out(e, "q_scale").data<float>()[row] == out(clean, "q_scale").data<float>()[row]);
  CHECK(std::memcmp(out(e, "q_fp8").data<std::uint8_t>(), out(clean, "q_fp8").data<std::uint8_t>(), 2 * 128) == 0);
  CHECK(std::memcmp(out(e, "k_fp8").data<std::uint8_t>() + 128, out(clean, "k_fp8").data<std::uint8_t>() + 128, 128) == 0);
}

TEST_CASE("ref.prolog schema problems: no RoPE source, cos without sin, head_dim 256") {
  Case c = make_case(1, 1, 128, 1);
  c.stage = "indexer.prolog";
  apply_attr_defaults(c);
  CHECK(!validate_case(c).empty());
  add_table(c, 1, 32, 1.0f, 0.0f);
  CHECK(validate_case(c).empty());
  c.inputs.erase("sin");
  c.inputs["positions"] = Tensor::from_vector(DType::i32, {1}, std::vector<std::int32_t>{0});
  CHECK(!validate_case(c).empty());
  Case d = make_case(1, 1, 256, 1);
  d.attrs["hadamard"] = std::int64_t{0};
  add_table(d, 1, 32, 1.0f, 0.0f);
  apply_attr_defaults(d);
  const auto probs = validate_case(d);
  REQUIRE(probs.size() == 1);
  CHECK(probs[0].str().find("head_dim 32, 64 or 128") != std::string::npos);
}

/* Generator of the kA_* / kB_* values (python3, numpy 2.x, ml_dtypes 0.6): an independent implementation of
   spec v32 §2.1-2.6 with numpy float32 arithmetic (one rounding per op), ml_dtypes bf16/e4m3 RNE casts, the
   documented LayerNorm statistics (double, then fp32; fma via exact rationals), the YaRN table via math.pow /
   math.cos / math.sin in double rounded to fp32.
# Independent numpy/ml_dtypes implementation of indexer.prolog (spec v32 §2.1-2.6) for the C++ test.
import math, numpy as np, ml_dtypes
from fractions import Fraction
bf16, e4m3 = ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn
f32 = np.float32
M64 = (1 << 64) - 1
class Lcg:
    def __init__(s, seed): s.s = seed
    def next(s):
        s.s = (s.s * 6364136223846793005 + 1442695040888963407) & M64
        return s.s >> 33
    def sym(s, m):  # integer in [-m, m]
        return int(s.next() % (2 * m + 1)) - m
def bfv(x): return f32(bf16(f32(x)))
def fma32(a, b, c):
    v = Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c))
    # correctly rounded to fp32 via exact rational rounding
    return f32_round(v)
def f32_round(v):
    if v == 0: return f32(0.0)
    sign = -1 if v < 0 else 1; a = abs(v)
    e = math.floor(math.log2(a)) if a.numerator else 0
    while Fraction(2) ** e > a: e -= 1
    while Fraction(2) ** (e + 1) <= a: e += 1
    q = Fraction(2) ** (max(e, -126) - 23)
    n = a / q; fl = math.floor(n); rem = n - fl
    if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and fl % 2 == 1): fl += 1
    return f32(sign * float(fl * q))
def layernorm(x, w, b, eps):
    xd = x.astype(np.float64); n = len(x)
    s = 0.0
    for v in xd: s += v
    mean_d = s / n
    sq = 0.0
    for v in xd: sq += (v - mean_d) ** 2
    var_d = sq / n
    mean = f32(mean_d); ve = f32(f32(var_d) + f32(eps))
    rstd = f32(1.0 / math.sqrt(float(ve)))
    return np.array([fma32(w[i], f32(rstd * f32(x[i] - mean)), b[i]) for i in range(n)], dtype=f32)
def rope(x, c, s, rd, neox):
    x = x.copy(); h = rd // 2
    for i in range(h):
        a, bb = (i, i + h) if neox else (2 * i, 2 * i + 1)
        xa, xb = x[a], x[bb]
        x[a] = bfv(f32(f32(xa * c[i]) - f32(xb * s[i])))
        x[bb] = bfv(f32(f32(xa * s[i]) + f32(xb * c[i])))
    return x
def hadamard(x):
    n = len(x)
    H = np.array([[(-1) ** bin(i & j).count("1") for j in range(n)] for i in range(n)])
    # fp32 FWHT: the butterfly order matters for rounding; do it explicitly in stride order 1..64
    v = x.astype(f32).copy(); h = 1
    while h < n:
        for j0 in range(0, n, 2 * h):
            for j in range(j0, j0 + h):
                a, b = v[j], v[j + h]; v[j] = f32(a + b); v[j + h] = f32(a - b)
        h *= 2
    sc = f32(128 ** -0.5) if n == 128 else f32(n ** -0.5)
    return np.array([bfv(f32(v[i] * sc)) for i in range(n)], dtype=f32)
def ue8m0(amax, eps=f32(1e-4)):
    t = f32(max(amax, eps) * f32(1 / 448))
    u = int(np.array([t], dtype=f32).view(np.uint32)[0])
    e = ((u >> 23) & 0xFF) - 127 + (1 if (u & 0x7FFFFF) else 0)
    return f32(2.0 ** e)
def quant(x, fmt):
    amax = f32(np.max(np.abs(x)))
    s = ue8m0(amax) if fmt == "ue8m0" else f32(max(amax, f32(1e-4)) / f32(448))
    y = np.clip(np.array([f32(v / s) for v in x], dtype=f32), -448, 448)
    return y.astype(e4m3).view(np.uint8), s
def run(T, H, Dh, rd, neox, had, fmt, seed, cos=None, sin=None, positions=None, eps=1e-6):
    g = Lcg(seed)
    q = np.array([bfv(g.sym(1000) / 256.0) for _ in range(T * H * Dh)], dtype=f32).reshape(T, H, Dh)
    k = np.array([bfv(g.sym(1000) / 256.0) for _ in range(T * Dh)], dtype=f32).reshape(T, Dh)
    w = np.array([f32(g.sym(1000) / 64.0) for _ in range(T * H)], dtype=f32).reshape(T, H)
    lw = np.array([f32(1 + g.sym(100) / 512.0) for _ in range(Dh)], dtype=f32)
    lb = np.array([f32(g.sym(100) / 1024.0) for _ in range(Dh)], dtype=f32)
    out = dict(q_fp8=[], q_scale=[], k_fp8=[], k_scale=[], weights=[])
    sm = f32(1 / math.sqrt(Dh))
    for t in range(T):
        c, s = cos[t], sin[t]
        kn = np.array([bfv(v) for v in layernorm(k[t], lw, lb, eps)], dtype=f32)
        kr = rope(kn, c, s, rd, neox)
        if had: kr = hadamard(kr)
        codes, sc = quant(kr, fmt); out["k_fp8"] += list(codes); out["k_scale"].append(sc)
        for h in range(H):
            qr = rope(q[t, h], c, s, rd, neox)
            if had: qr = hadamard(qr)
            codes, sc = quant(qr, fmt); out["q_fp8"] += list(codes); out["q_scale"].append(sc)
            out["weights"].append(f32(f32(w[t, h] * sc) * sm))
    return out
def triples(T, half):
    tr = [(3, 4, 5), (5, 12, 13), (8, 15, 17), (7, 24, 25), (20, 21, 29), (12, 35, 37), (9, 40, 41), (28, 45, 53)]
    cos = np.zeros((T, half), dtype=f32); sin = np.zeros((T, half), dtype=f32)
    for t in range(T):
        for i in range(half):
            a, b, c = tr[(t * 7 + i) % len(tr)]
            sa = -1 if (t + i) % 3 == 0 else 1
            cos[t, i] = f32(f32(a) / f32(c)) * sa; sin[t, i] = f32(f32(b) / f32(c))
    return cos, sin
def yarn(rd, positions, theta=10000.0, factor=40.0, orig=4096, maxlen=16384, bf=32.0, bs=1.0):
    half = rd // 2
    f = [f32(f32(1.0) / f32(math.pow(theta, float(f32(f32(2 * i) / f32(rd)))))) for i in range(half)]
    if maxlen > orig:
        cd = lambda nr: rd * math.log(orig / (nr * 2 * math.pi)) / (2 * math.log(theta))
        lo = max(math.floor(cd(bf)), 0); hi = min(math.ceil(cd(bs)), rd - 1)
        if lo == hi: hi += 0.001
        for i in range(half):
            r = min(max(f32(f32(f32(i) - f32(lo)) / f32(hi - lo)), f32(0)), f32(1))
            sm = f32(f32(1) - r)
            f[i] = f32(f32(f32(f[i] / f32(factor)) * f32(f32(1) - sm)) + f32(f[i] * sm))
    cos = np.zeros((len(positions), half), dtype=f32); sin = np.zeros_like(cos)
    for t, p in enumerate(positions):
        for i in range(half):
            th = f32(f32(p) * f[i]); cos[t, i] = f32(math.cos(float(th))); sin[t, i] = f32(math.sin(float(th)))
    return cos, sin
def hexs(b): return "".join("%02x" % int(v) for v in b)
def fl(v): return ", ".join(float(x).hex() for x in v)
import sys
cA, sA = triples(2, 32)
A = run(2, 2, 128, 64, True, True, "ue8m0", 12345, cA, sA)
pos = [5, 16383, 70000]
cB, sB = yarn(64, pos)
B = run(3, 2, 128, 64, False, False, "fp32_div", 777, cB, sB)
for name, o in (("A", A), ("B", B)):
    print(f"// case {name}")
    print(f'const char* k{name}_q_fp8 = "{hexs(o["q_fp8"])}";')
    print(f'const char* k{name}_k_fp8 = "{hexs(o["k_fp8"])}";')
    for key in ("q_scale", "k_scale", "weights"):
        print(f"const std::vector<float> k{name}_{key} = {{{fl(o[key])}}};")
*/
