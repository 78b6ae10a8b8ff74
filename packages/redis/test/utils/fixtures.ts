import type { IdempotencyStore } from "@effect-idempotency/core"
import { IdempotencyRecord } from "@effect-idempotency/core"
import { RedisClient, RedisStore } from "@effect-idempotency/redis"
import { StoreFixtures } from "@effect-idempotency/testing"
import { assert } from "@effect/vitest"
import * as Context from "effect/Context"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import type { RedisOptions } from "ioredis"
import { Redis } from "ioredis"
import { randomUUID } from "node:crypto"
import { inject } from "vitest"

declare module "vitest" {
  export interface ProvidedContext {
    readonly redisUrl: string
    readonly redisKeyPrefix: string
  }
}

/** The server of this run: `TEST_REDIS_URL`, or the `redis-server` the global setup started. */
export const redisUrl: string = inject("redisUrl")

/** The start of every key this run writes; the global setup deletes them at the end. */
const runPrefix: string = inject("redisKeyPrefix")

/** A key prefix no other test uses, so tests never share a record or a purge. */
export const uniquePrefix = (name: string): string => `${runPrefix}${name}:${randomUUID().slice(0, 8)}:`

/** Reservation requests and the assertions on results and exits: the testing kit's. */
export const { expectExisting, expectReserved, failureOf, FP_A, FP_B, reserveRequest } = StoreFixtures

/** A record id with a random key, under `operation`. */
export const freshId = (operation = "redis-test") => StoreFixtures.freshId({ operation })

export const expectFailure = <A, E>(exit: Exit.Exit<A, E>, tag: string, method?: string) => {
  const error = failureOf(exit) as { readonly _tag: string; readonly method?: string }
  assert.strictEqual(error._tag, tag)
  if (method !== undefined) assert.strictEqual(error.method, method)
  return error
}

/** Reserves `id` on `store` and completes it (a success), to expire after `ttl`. */
export const completeRecord = (
  store: IdempotencyStore.IdempotencyStore["Type"],
  id: IdempotencyRecord.RecordId,
  ttl: Duration.Duration
) =>
  Effect.flatMap(store.reserve(reserveRequest(id)), (reserved) =>
    store.complete({
      id,
      token: expectReserved(reserved).token,
      outcome: IdempotencyRecord.StoredOutcome.Success({ value: "1" }),
      ttl
    }))

export const Payload = Schema.Struct({ amount: Schema.Number, currency: Schema.String })

export const payload = { amount: 10, currency: "EUR" } as const

/** The record key of an id under a prefix, as the store names it. */
export const recordKey = (prefix: string, id: IdempotencyRecord.RecordId) => `${prefix}{${id.value}}`

/** A client layer on `url` (the run's server by default), with the store's recommended options. */
export const clientLayer = (options?: RedisClient.Options): Layer.Layer<RedisClient.RedisClient> =>
  RedisClient.layer({ url: redisUrl, ...options })

/** A store on a client of its own, with the client in the context too. */
export const storeLayer = (
  options?: RedisStore.Options,
  client: Layer.Layer<RedisClient.RedisClient> = clientLayer()
) => RedisStore.layerWith(options).pipe(Layer.provideMerge(client))

/** A plain ioredis connection outside the store (to inspect keys, kill clients, flush scripts). */
export const rawClient = (url = redisUrl, options?: RedisOptions) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const client = new Redis(url, { maxRetriesPerRequest: 1, ...options })
      client.on("error", () => {})
      return client
    }),
    (client) => Effect.sync(() => client.disconnect())
  )

export const raw = <A>(f: () => Promise<A>) => Effect.promise(f)

/** A plain ioredis connection to the run's server, outside the store, for inspection. */
export class RawRedis extends Context.Tag("test/RawRedis")<RawRedis, Redis>() {}

export const rawLayer = (url = redisUrl): Layer.Layer<RawRedis> => Layer.scoped(RawRedis, rawClient(url))

/** Runs a command on the raw connection. */
export const rawCall = <A>(f: (client: Redis) => Promise<A>) =>
  Effect.flatMap(RawRedis, (client) => raw(() => f(client)))
