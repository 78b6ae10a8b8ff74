import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { LeaseLost } from "../IdempotencyError.js"
import type { IdempotencyRecord } from "../IdempotencyRecord.js"
import { canTakeOver, isLive, ReserveResult } from "../IdempotencyRecord.js"
import type { AdminStore, State, StoredRecord, UnblockResult } from "./admin.js"
import { AdminTypeId, parseRecordId, stateOf, unblockable } from "./admin.js"
import { ExpiryQueue } from "./expiryQueue.js"
import { flat, flatOutcome } from "./flat.js"
import type { Service, TokenRequest } from "./service.js"

const DEFAULT_PURGE_LIMIT = 10_000

/**
 * @since 0.1.0
 * @category models
 */
export interface MemoryOptions {
  /** A background purge at this interval (see `layerPurge`). */
  readonly purgeInterval?: Duration.DurationInput | undefined
  /** Default 10,000. */
  readonly purgeLimit?: number | undefined
  /** Log a warning that the store is per-process. Default `true`. */
  readonly warn?: boolean | undefined
  /** Start on a deployed runtime too (AWS Lambda, Netlify, Cloudflare Workers, `NODE_ENV=production`). Default `false`. */
  readonly allowInProduction?: boolean | undefined
}

/** @internal */
export const make = (options?: MemoryOptions): Effect.Effect<Service> =>
  Effect.gen(function*() {
    if (options?.warn !== false) {
      yield* Effect.logWarning(
        "idempotency: the memory store keeps records in this process only; use a shared store across instances"
      )
    }
    // each method reads the clock, checks and writes in one synchronous step: every conditional write is atomic
    const records = new Map<string, IdempotencyRecord>()
    const expiries = new ExpiryQueue()
    const write = (id: string, record: IdempotencyRecord): void => {
      flat(record.token)
      flat(record.fingerprint)
      flatOutcome(record.outcome)
      const previous = records.get(id)
      records.set(id, record)
      if (previous === undefined || previous.expiresAt !== record.expiresAt) expiries.push(record.expiresAt, id)
    }

    const live = (id: string, now: number): IdempotencyRecord | undefined => {
      const record = records.get(id)
      return record !== undefined && isLive(record, now) ? record : undefined
    }

    const owned = (
      method: LeaseLost["method"],
      request: TokenRequest,
      now: number,
      f: (record: IdempotencyRecord) => void
    ): Effect.Effect<void, LeaseLost> => {
      const record = live(request.id.value, now)
      if (record === undefined || record.status !== "IN_PROGRESS" || record.token !== request.token) {
        return Effect.fail(new LeaseLost({ method, recordId: request.id.value }))
      }
      f(record)
      return Effect.void
    }

    const atNow = <X, Y>(f: (now: number) => Effect.Effect<X, Y>): Effect.Effect<X, Y> =>
      Effect.clockWith((clock) => f(clock.unsafeCurrentTimeMillis()))

    const store: Service = {
      reserve: (request) =>
        atNow((now): Effect.Effect<ReserveResult> => {
          const existing = live(request.id.value, now)
          if (existing !== undefined && !canTakeOver(existing, request, now)) {
            return Effect.succeed(ReserveResult.Existing({ record: existing, now }))
          }
          const lease = Duration.toMillis(request.lease)
          const leaseUntil = now + lease
          const expiresAt = now + Math.max(lease, Duration.toMillis(request.ttl))
          const attempt = existing === undefined ? 1 : existing.attempt + 1
          write(request.id.value, {
            status: "IN_PROGRESS",
            token: request.token,
            fingerprint: request.fingerprint,
            attempt,
            leaseUntil,
            expiresAt,
            outcome: undefined
          })
          return Effect.succeed(ReserveResult.Reserved({ token: request.token, attempt, leaseUntil, expiresAt }))
        }),
      complete: (request) =>
        atNow((now) =>
          owned("complete", request, now, (record) => {
            write(request.id.value, {
              ...record,
              status: "COMPLETED",
              outcome: request.outcome,
              expiresAt: now + Duration.toMillis(request.ttl)
            })
          })
        ),
      release: (request) =>
        atNow((now) =>
          owned("release", request, now, () => {
            records.delete(request.id.value)
          })
        ),
      markFailed: (request) =>
        atNow((now) =>
          owned("markFailed", request, now, (record) => {
            write(request.id.value, {
              ...record,
              status: "FAILED",
              expiresAt: now + Duration.toMillis(request.ttl)
            })
          })
        ),
      extend: (request) =>
        atNow((now) =>
          owned("extend", request, now, (record) => {
            const leaseUntil = now + Duration.toMillis(request.lease)
            write(request.id.value, {
              ...record,
              leaseUntil,
              expiresAt: Math.max(record.expiresAt, leaseUntil)
            })
          })
        ),
      get: (id) => atNow((now) => Effect.succeed(Option.fromNullable(live(id.value, now)))),
      purgeExpired: (purgeOptions) =>
        Effect.map(Clock.currentTimeMillis, (now) => {
          const limit = purgeOptions?.limit ?? DEFAULT_PURGE_LIMIT
          let purged = 0
          while (purged < limit && expiries.peek() <= now) {
            const id = expiries.pop()
            const record = records.get(id)
            // a stale entry: the record was rewritten (its current expiry is queued too) or removed
            if (record !== undefined && !isLive(record, now)) {
              records.delete(id)
              purged++
            }
          }
          return purged
        })
    }
    const admin: AdminStore = {
      list: (query) =>
        atNow((now) => {
          const matches = (id: string, record: IdempotencyRecord) =>
            isLive(record, now) &&
            (query.state === undefined || stateOf(record, now) === query.state) &&
            (query.operation === undefined || parseRecordId(id).operation === query.operation) &&
            (query.olderThanMillis === undefined || record.leaseUntil <= now - query.olderThanMillis)
          const ids = [...records.keys()].filter((id) => query.cursor === undefined || id > query.cursor).sort()
          const page: Array<StoredRecord> = []
          let last: string | undefined
          for (const id of ids) {
            if (page.length === query.limit) break
            last = id
            const record = records.get(id)!
            if (matches(id, record)) page.push({ recordId: id, record })
          }
          const more = last !== undefined && ids[ids.length - 1] !== last
          return Effect.succeed({ records: page, now, cursor: more ? last : undefined })
        }),
      read: (recordId) => atNow((now) => Effect.succeed({ record: Option.fromNullable(live(recordId, now)), now })),
      unblock: ({ attempt, recordId }) =>
        atNow((now): Effect.Effect<UnblockResult> => {
          const record = live(recordId, now)
          if (record === undefined) return Effect.succeed({ _tag: "Refused", reason: "absent" })
          if (record.attempt !== attempt) {
            return Effect.succeed({ _tag: "Refused", reason: "changed", attempt: record.attempt })
          }
          const state = stateOf(record, now)
          if (!unblockable.has(state)) {
            return Effect.succeed({ _tag: "Refused", reason: refusalOf(state), attempt: record.attempt })
          }
          records.delete(recordId)
          return Effect.succeed({ _tag: "Unblocked" })
        }),
      stats: atNow((now) => {
        const counts = new Map<string, { operation: string; state: State; count: number }>()
        for (const [id, record] of records) {
          if (!isLive(record, now)) continue
          const operation = parseRecordId(id).operation
          const state = stateOf(record, now)
          const entry = counts.get(`${operation}\u0000${state}`)
          if (entry === undefined) counts.set(`${operation}\u0000${state}`, { operation, state, count: 1 })
          else entry.count++
        }
        return Effect.succeed([...counts.values()])
      })
    }
    return Object.assign(store, { [AdminTypeId]: admin })
  })

const refusalOf = (state: State): "running" | "completed" | "omitted" =>
  state === "running" ? "running" : state === "omitted" ? "omitted" : "completed"

/** @internal */
export const purgeLoop = (
  store: Service,
  interval: Duration.DurationInput,
  options?: { readonly limit?: number | undefined }
): Effect.Effect<never> =>
  store.purgeExpired(options).pipe(
    Effect.tap((purged) => purged > 0 ? Effect.logDebug(`idempotency: purged ${purged} expired records`) : Effect.void),
    Effect.catchAll((error) => Effect.logWarning("idempotency: purge of expired records failed", error)),
    Effect.zipRight(Effect.sleep(interval)),
    Effect.forever
  )
