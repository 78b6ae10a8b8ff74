import { PlatformModel } from "@effect-idempotency/testing"
import { assert, describe, it } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FastCheck from "effect/FastCheck"
import * as TestServices from "effect/TestServices"

const ms = (input: Duration.DurationInput) => Duration.toMillis(Duration.decode(input))

/** One delivery at `atMs` with attempts after the given waits. */
const delivery = <X>(
  source: PlatformModel.Source,
  atMs: number,
  attempts: ReadonlyArray<readonly [number, X]>
): PlatformModel.Delivery<X> => ({
  source,
  atMs,
  attempts: attempts.map(([waitMs, value]) => ({ waitMs, value }))
})

const plan = <X>(
  deliveries: ReadonlyArray<PlatformModel.Delivery<X>>,
  options?: { readonly timeLimitMs?: number; readonly maxEventAgeMs?: number }
): PlatformModel.Plan<X> => ({
  platform: "test",
  timeLimitMs: options?.timeLimitMs ?? 10_000,
  maxEventAgeMs: options?.maxEventAgeMs,
  deliveries
})

/** What an attempt does in these tests: fail, succeed, or run past any time limit. */
type Act = "fail" | "succeed" | "hang"

const acts = (
  source: PlatformModel.Source,
  atMs: number,
  attempts: ReadonlyArray<readonly [number, Act]>
): PlatformModel.Delivery<Act> => delivery(source, atMs, attempts)

const act = (context: PlatformModel.AttemptContext<Act>) =>
  context.value === "succeed"
    ? Effect.succeed(context.id)
    : context.value === "fail"
    ? Effect.fail("boom")
    : Effect.never

describe("PlatformModel presets", () => {
  it("Netlify synchronous: a 10 s limit and no platform retries; clients resend", () => {
    const platform = PlatformModel.netlifySynchronous
    assert.strictEqual(ms(platform.timeLimit), 10_000)
    assert.deepStrictEqual(platform.retryDelays, [])
    assert.isAbove(platform.resends?.max ?? 0, 0)
  })

  it("Netlify background: a 15 min limit, retries after 1 and then 2 minutes", () => {
    const platform = PlatformModel.netlifyBackground
    assert.strictEqual(ms(platform.timeLimit), 15 * 60_000)
    assert.deepStrictEqual(platform.retryDelays.map(ms), [60_000, 120_000])
  })

  it("AWS Lambda asynchronous invocation: 2 retries about 1 and 2 minutes apart, 6 h maximum event age", () => {
    const platform = PlatformModel.awsLambdaAsync
    assert.strictEqual(ms(platform.timeLimit), 3_000)
    assert.deepStrictEqual(platform.retryDelays.map(ms), [60_000, 120_000])
    assert.strictEqual(ms(platform.maxEventAge ?? 0), 6 * 3_600_000)
    assert.isAbove(platform.duplicates?.max ?? 0, 0)
  })

  it("describes a platform in one line", () => {
    assert.strictEqual(
      PlatformModel.describe(PlatformModel.netlifyBackground),
      "Netlify background function (time limit 15m 0s; retries after 1m 0s, then 2m 0s; up to 1 resend(s) within 15m 0s)"
    )
  })
})

describe("PlatformModel.arbitrary", () => {
  const platforms = [PlatformModel.netlifySynchronous, PlatformModel.netlifyBackground, PlatformModel.awsLambdaAsync]

  it.prop(
    "draws plans within the platform's rules",
    [
      FastCheck.constantFrom(...platforms).chain((platform) =>
        PlatformModel.arbitrary(platform, FastCheck.constant("x")).map((plan) => [platform, plan] as const)
      )
    ],
    ([[platform, plan]]) => {
      assert.strictEqual(plan.platform, platform.name)
      assert.strictEqual(plan.timeLimitMs, ms(platform.timeLimit))
      const [first, ...others] = plan.deliveries
      assert.deepStrictEqual([first!.source, first!.atMs], ["event", 0])
      const duplicates = others.filter((d) => d.source === "duplicate")
      const resends = others.filter((d) => d.source === "resend")
      assert.isAtMost(duplicates.length, platform.duplicates?.max ?? 0)
      assert.isAtMost(resends.length, platform.resends?.max ?? 0)
      for (const d of duplicates) assert.isAtMost(d.atMs, ms(platform.duplicates!.within))
      for (const d of resends) assert.isAtMost(d.atMs, ms(platform.resends!.within))
      const jitter = platform.retryJitter ?? 0
      for (const d of plan.deliveries) {
        assert.strictEqual(d.attempts.length, 1 + platform.retryDelays.length)
        assert.strictEqual(d.attempts[0]!.waitMs, 0)
        d.attempts.slice(1).forEach((attempt, i) => {
          const delay = ms(platform.retryDelays[i]!)
          assert.isAtLeast(attempt.waitMs, Math.floor(delay * (1 - jitter)))
          assert.isAtMost(attempt.waitMs, Math.ceil(delay * (1 + jitter)))
        })
      }
    },
    { fastCheck: { numRuns: 300 } }
  )

  it("draws concurrent, late and no duplicates", () => {
    const plans = FastCheck.sample(PlatformModel.arbitrary(PlatformModel.awsLambdaAsync, FastCheck.constant(0)), {
      numRuns: 400,
      seed: 7
    })
    const duplicates = plans.flatMap((plan) => plan.deliveries.filter((d) => d.source === "duplicate"))
    assert.isTrue(plans.some((plan) => plan.deliveries.length === 1), "some plans have no duplicate")
    assert.isTrue(duplicates.some((d) => d.atMs <= 2_000), "some duplicates are concurrent")
    assert.isTrue(duplicates.some((d) => d.atMs > 3_600_000), "some come hours later")
  })
})

describe("PlatformModel.play", () => {
  it.effect("retries a failed attempt after each wait and stops at the first success", () =>
    Effect.gen(function*() {
      const attempts = yield* PlatformModel.play(
        plan([acts("event", 0, [[0, "fail"], [60_000, "fail"], [120_000, "succeed"], [60_000, "succeed"]])]),
        act
      )
      assert.deepStrictEqual(attempts.map((a) => [a.id, a.try, a.startedAt]), [
        [1, 1, 0],
        [2, 2, 60_000],
        [3, 3, 180_000]
      ])
      assert.isTrue(attempts[2]!.outcome._tag === "Completed" && Exit.isSuccess(attempts[2]!.outcome.exit))
    }))

  it.effect("stops an attempt at the time limit, and retries it", () =>
    Effect.gen(function*() {
      const attempts = yield* PlatformModel.play(
        plan([acts("event", 0, [[0, "hang"], [1_000, "succeed"]])], { timeLimitMs: 3_000 }),
        act
      )
      assert.deepStrictEqual(attempts.map((a) => [a.outcome._tag, a.startedAt, a.endedAt]), [
        ["Killed", 0, 3_000],
        ["Completed", 4_000, 4_000]
      ])
      assert.strictEqual(attempts[0]!.deadline, 3_000)
    }))

  it.effect("starts no retry once the event is older than the maximum event age; a resend's age starts anew", () =>
    Effect.gen(function*() {
      const attempts = yield* PlatformModel.play(
        plan(
          [
            acts("duplicate", 50_000, [[0, "fail"], [60_000, "fail"]]),
            acts("resend", 50_000, [[0, "fail"], [60_000, "fail"]])
          ],
          { maxEventAgeMs: 100_000 }
        ),
        act
      )
      const tries = attempts.map((a) => [a.delivery, a.try]).sort((a, b) => a[0]! - b[0]! || a[1]! - b[1]!)
      assert.deepStrictEqual(tries, [[1, 1], [2, 1], [2, 2]])
    }))

  it.effect("runs deliveries concurrently, and retries only after failures by default", () =>
    Effect.gen(function*() {
      const attempts = yield* PlatformModel.play(
        plan([
          acts("event", 0, [[0, "hang"], [1_000, "succeed"]]),
          acts("duplicate", 500, [[0, "succeed"], [1_000, "succeed"]])
        ]),
        act
      )
      assert.deepStrictEqual(attempts.map((a) => [a.delivery, a.startedAt]), [[1, 0], [2, 500], [1, 11_000]])
    }))

  it.effect("takes a custom retry rule", () =>
    Effect.gen(function*() {
      const attempts = yield* PlatformModel.play(
        plan([acts("event", 0, [[0, "fail"], [1_000, "fail"]])]),
        act,
        { retryOn: () => false }
      )
      assert.strictEqual(attempts.length, 1)
    }))

  it.effect("moves the clock one wake-up at a time when asked to settle between them", () =>
    Effect.gen(function*() {
      let settles = 0
      const attempts = yield* PlatformModel.play(
        plan([acts("event", 0, [[0, "fail"], [60_000, "fail"], [120_000, "succeed"]])]),
        act,
        // a settle waits in real time, so the other fibers run until they wait on TestClock
        { settle: Effect.zipRight(Effect.sync(() => settles++), TestServices.provideLive(Effect.sleep("1 millis"))) }
      )
      assert.strictEqual(attempts.length, 3)
      assert.isAtLeast(settles, 3)
    }))

  it("computes the time by which every attempt has ended", () => {
    assert.strictEqual(
      PlatformModel.horizonMillis(plan([delivery("event", 100, [[0, 1], [60_000, 1]])], { timeLimitMs: 3_000 })),
      100 + 3_000 + 60_000 + 3_000 + 1
    )
  })
})
