/**
 * Known-good configurations that give exactly once with a deduplicating downstream: thousands of
 * random cases (with the other known-good file) of retries, duplicates, resends, crashes at every
 * named point, store failures and stalls, and writes that land after their caller gave up, must pass.
 */
import { IdempotencyPolicy } from "@effect-idempotency/core"
import { PlatformModel } from "@effect-idempotency/testing"
import { assert, describe } from "@effect/vitest"
import * as Schedule from "effect/Schedule"
import { holds, property } from "./utils/orders.js"

describe.concurrent("RetryProperty passes known-good configurations: exactly once with a deduplicating downstream", () => {
  holds(
    "keepLease, key forwarded to a deduplicating API, under AWS Lambda's asynchronous retries",
    property({ timeout: "2 seconds", onTimeout: "keepLease" }, {
      deduplicate: true,
      require: "exactlyOnce"
    }),
    500,
    (report) => {
      assert.strictEqual(report.guarantee, "exactlyOnceWithDeduplication")
      assert.isAbove(report.casesDeduplicated, 0, "some cases needed the downstream's deduplication")
      assert.strictEqual(report.casesWithDuplicates, 0)
    }
  )

  holds(
    "keepLease with a heartbeat and waiting on conflicts, under Netlify background retries",
    property({
      timeout: "5 minutes",
      onTimeout: "keepLease",
      lease: "1 minute",
      heartbeat: "20 seconds",
      inProgress: IdempotencyPolicy.waitOnConflict(
        Schedule.spaced("10 seconds").pipe(Schedule.intersect(Schedule.recurs(3)))
      )
    }, {
      platform: PlatformModel.netlifyBackground,
      deduplicate: true,
      // late answers up to a minute past the downstream's timeout (not the default 22.5 minutes)
      downstream: { maxLatency: "6 minutes" },
      require: "exactlyOnce"
    }),
    300,
    (report) => {
      assert.strictEqual(report.guarantee, "exactlyOnceWithDeduplication")
    }
  )

  holds(
    "timeout policy release is safe too when the downstream deduplicates",
    property({ timeout: "2 seconds", onTimeout: "release" }, {
      deduplicate: ["POST /orders"], // deduplication set on the one endpoint the operation writes to
      require: "exactlyOnce"
    }),
    300,
    (report) => {
      assert.strictEqual(report.guarantee, "exactlyOnceWithDeduplication")
    }
  )
})
