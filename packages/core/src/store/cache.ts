import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { IdempotencyRecord } from "../IdempotencyRecord.js"
import { ReserveResult } from "../IdempotencyRecord.js"
import { flat, flatOutcome } from "./flat.js"
import type { Service } from "./service.js"

const DEFAULT_CAPACITY = 10_000

/**
 * @since 0.1.0
 * @category models
 */
export interface CacheOptions {
  /** Completed records (and in-flight reservations) kept. Default 10,000. */
  readonly capacity?: number | undefined
}

interface Entry {
  readonly record: IdempotencyRecord
  /** On this instance's clock. */
  readonly until: number
}

interface Reservation {
  readonly fingerprint: string
  readonly attempt: number
  readonly leaseUntil: number
}

const bounded = <V>(capacity: number) => {
  const map = new Map<string, V>()
  return {
    get: (key: string): V | undefined => {
      const value = map.get(key)
      if (value !== undefined) {
        map.delete(key)
        map.set(key, value)
      }
      return value
    },
    set: (key: string, value: V): void => {
      map.delete(key)
      map.set(key, value)
      if (map.size > capacity) map.delete(map.keys().next().value!)
    },
    delete: (key: string): void => {
      map.delete(key)
    }
  }
}

/** @internal */
export const make = (
  store: Service,
  options?: CacheOptions
): Effect.Effect<Service> =>
  Effect.sync(() => {
    const capacity = Math.max(1, options?.capacity ?? DEFAULT_CAPACITY)
    // COMPLETED records only: README.md#the-warm-instance-cache
    const completed = bounded<Entry>(capacity)
    const reservations = bounded<Reservation>(capacity)
    const ownKey = (id: string, token: string) => `${token}\u0000${id}`

    const hit = (id: string, now: number): Entry | undefined => {
      const entry = completed.get(id)
      if (entry === undefined) return undefined
      if (entry.until > now) return entry
      completed.delete(id)
      return undefined
    }
    const recordNow = (entry: Entry, now: number) => entry.record.expiresAt - (entry.until - now)

    const settled = <A, E>(effect: Effect.Effect<A, E>, id: string, token: string) =>
      Effect.ensuring(effect, Effect.sync(() => reservations.delete(ownKey(id, token))))

    const cachedStore: Service = {
      reserve: (request) =>
        Effect.flatMap(Clock.currentTimeMillis, (now) => {
          const entry = hit(request.id.value, now)
          if (entry !== undefined) {
            return Effect.succeed(ReserveResult.Existing({ record: entry.record, now: recordNow(entry, now) }))
          }
          return Effect.tap(store.reserve(request), (result) => {
            if (result._tag === "Reserved") {
              reservations.set(ownKey(request.id.value, request.token), {
                fingerprint: request.fingerprint,
                attempt: result.attempt,
                leaseUntil: result.leaseUntil
              })
            } else if (result.record.status === "COMPLETED") {
              completed.set(request.id.value, {
                record: result.record,
                until: now + result.record.expiresAt - result.now
              })
            }
          })
        }),
      complete: (request) =>
        Effect.flatMap(Clock.currentTimeMillis, (sentAt) =>
          settled(
            Effect.tap(store.complete(request), () => {
              const reservation = reservations.get(ownKey(request.id.value, request.token))
              if (reservation === undefined) return
              // the store counts the TTL from when it applied the write, after `sentAt`
              const until = sentAt + Duration.toMillis(request.ttl)
              completed.set(request.id.value, {
                record: {
                  status: "COMPLETED",
                  token: flat(request.token),
                  fingerprint: reservation.fingerprint,
                  attempt: reservation.attempt,
                  leaseUntil: reservation.leaseUntil,
                  expiresAt: until,
                  outcome: flatOutcome(request.outcome)
                },
                until
              })
            }),
            request.id.value,
            request.token
          )),
      release: (request) => settled(store.release(request), request.id.value, request.token),
      markFailed: (request) => settled(store.markFailed(request), request.id.value, request.token),
      extend: store.extend,
      get: (id) =>
        Effect.flatMap(Clock.currentTimeMillis, (now) => {
          const entry = hit(id.value, now)
          return entry !== undefined ? Effect.succeed(Option.some(entry.record)) : store.get(id)
        }),
      purgeExpired: store.purgeExpired
    }
    return cachedStore
  })
