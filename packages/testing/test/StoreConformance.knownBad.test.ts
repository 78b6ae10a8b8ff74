/**
 * The conformance checks catch what they name: a small reference store passes every check, and
 * each deliberately broken variant of it fails the check that names its bug.
 */
import { IdempotencyError, IdempotencyRecord, IdempotencyStore } from "@effect-idempotency/core"
import { StoreConformance } from "@effect-idempotency/testing"
import { assert, describe, it } from "@effect/vitest"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"

type Bug =
  | "none"
  | "purgeDeletesLiveRecords"
  | "purgeIgnoresLimit"
  | "ttlFromReservation"
  | "extendKeepsExpiry"
  | "takeoverNotAtomic"
  | "markFailedOnCompleted"

/** A store in a Map, right but for `bug`. */
const referenceStore = (bug: Bug): IdempotencyStore.IdempotencyStore["Type"] => {
  const records = new Map<string, IdempotencyRecord.IdempotencyRecord & { readonly reservedAt: number }>()
  const live = (id: string, now: number) => {
    const record = records.get(id)
    return record !== undefined && IdempotencyRecord.isLive(record, now) ? record : undefined
  }
  const owned = (
    method: IdempotencyError.LeaseLost["method"],
    request: IdempotencyStore.TokenRequest,
    allowCompleted = false
  ) =>
    Effect.flatMap(Clock.currentTimeMillis, (now) => {
      const record = live(request.id.value, now)
      const ok = record !== undefined && record.token === request.token &&
        (record.status === "IN_PROGRESS" || (allowCompleted && record.status === "COMPLETED"))
      return ok
        ? Effect.succeed({ record, now })
        : Effect.fail(new IdempotencyError.LeaseLost({ method, recordId: request.id.value }))
    })
  return {
    reserve: (request) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const existing = live(request.id.value, now)
        if (existing !== undefined && !IdempotencyRecord.canTakeOver(existing, request, now)) {
          return IdempotencyRecord.ReserveResult.Existing({ record: existing, now })
        }
        // a check and a write that another fiber can come between
        if (bug === "takeoverNotAtomic") yield* Effect.yieldNow()
        const lease = Duration.toMillis(request.lease)
        const attempt = existing === undefined ? 1 : existing.attempt + 1
        const record = {
          status: "IN_PROGRESS" as const,
          token: request.token,
          fingerprint: request.fingerprint,
          attempt,
          leaseUntil: now + lease,
          expiresAt: now + Math.max(lease, Duration.toMillis(request.ttl)),
          outcome: undefined,
          reservedAt: now
        }
        records.set(request.id.value, record)
        return IdempotencyRecord.ReserveResult.Reserved({
          token: request.token,
          attempt,
          leaseUntil: record.leaseUntil,
          expiresAt: record.expiresAt
        })
      }),
    complete: (request) =>
      Effect.map(owned("complete", request), ({ now, record }) => {
        const from = bug === "ttlFromReservation" ? record.reservedAt : now
        records.set(request.id.value, {
          ...record,
          status: "COMPLETED",
          outcome: request.outcome,
          expiresAt: from + Duration.toMillis(request.ttl)
        })
      }),
    release: (request) => Effect.map(owned("release", request), () => void records.delete(request.id.value)),
    markFailed: (request) =>
      Effect.map(owned("markFailed", request, bug === "markFailedOnCompleted"), ({ now, record }) => {
        records.set(request.id.value, { ...record, status: "FAILED", expiresAt: now + Duration.toMillis(request.ttl) })
      }),
    extend: (request) =>
      Effect.map(owned("extend", request), ({ now, record }) => {
        const leaseUntil = now + Duration.toMillis(request.lease)
        records.set(request.id.value, {
          ...record,
          leaseUntil,
          expiresAt: bug === "extendKeepsExpiry" ? record.expiresAt : Math.max(record.expiresAt, leaseUntil)
        })
      }),
    get: (id) => Effect.map(Clock.currentTimeMillis, (now) => Option.fromNullable(live(id.value, now))),
    purgeExpired: (options) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        const limit = bug === "purgeIgnoresLimit" ? Infinity : options?.limit ?? 1000
        let purged = 0
        for (const [id, record] of records) {
          if (purged >= limit) break
          if (bug === "purgeDeletesLiveRecords" || !IdempotencyRecord.isLive(record, now)) {
            records.delete(id)
            purged++
          }
        }
        return purged
      })
  }
}

const checks = StoreConformance.checks({ concurrency: 50 })

const run = (bug: Bug, name: string) => {
  const check = checks.find((check) => check.name === name)
  if (check === undefined) throw new Error(`no check named ${name}`)
  return Effect.exit(Effect.provideService(check.run, IdempotencyStore.IdempotencyStore, referenceStore(bug)))
}

const PURGE = "purge deletes expired records only, and at most `limit` per call"

describe("the conformance checks catch what they name", () => {
  it.effect("the reference store passes every check", () =>
    Effect.gen(function*() {
      for (const check of checks) {
        const exit = yield* run("none", check.name)
        assert.isTrue(Exit.isSuccess(exit), `${check.name}: ${Exit.isFailure(exit) ? String(exit.cause) : ""}`)
      }
    }))

  const cases: ReadonlyArray<readonly [Bug, string]> = [
    ["purgeDeletesLiveRecords", PURGE],
    ["purgeIgnoresLimit", PURGE],
    ["ttlFromReservation", "the TTL of an outcome counts from its completion, not from the reservation"],
    ["extendKeepsExpiry", "extend keeps a record past a TTL shorter than the new lease"],
    [
      "takeoverNotAtomic",
      "a takeover of a FAILED record, and of an expired one, is won by exactly one of concurrent attempts"
    ],
    ["markFailedOnCompleted", "markFailed on a COMPLETED record gets LeaseLost and leaves the outcome"]
  ]
  for (const [bug, name] of cases) {
    it.effect(`${bug} fails "${name}"`, () =>
      Effect.gen(function*() {
        assert.isTrue(Exit.isFailure(yield* run(bug, name)))
      }))
  }
})
