import { IdempotencyKey, IdempotencyRecord } from "@effect-idempotency/core"
import type { IdempotencyStore } from "@effect-idempotency/core"
import { RedisClient, RedisStore } from "@effect-idempotency/redis"
import { assert } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
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

export const FP_A = "sha256:aaaa"
export const FP_B = "sha256:bbbb"

/** The start of every key this run writes; the global setup deletes them at the end. */
const runPrefix: string = inject("redisKeyPrefix")

/** A key prefix no other test uses, so tests never share a record or a purge. */
export const uniquePrefix = (name: string): string => `${runPrefix}${name}:${randomUUID().slice(0, 8)}:`

export const freshId = (operation = "redis-test") =>
  IdempotencyRecord.makeRecordId({ operation, key: IdempotencyKey.unsafeMake(randomUUID()) })

export const reserveRequest = (
  id: IdempotencyRecord.RecordId,
  overrides?: Partial<IdempotencyStore.ReserveRequest>
): IdempotencyStore.ReserveRequest => ({
  id,
  token: randomUUID(),
  fingerprint: FP_A,
  lease: Duration.seconds(30),
  ttl: Duration.hours(1),
  takeover: true,
  ...overrides
})

export const expectReserved = (result: IdempotencyRecord.ReserveResult) => {
  if (result._tag !== "Reserved") assert.fail(`expected Reserved, got Existing(${result.record.status})`)
  return result
}

export const expectExisting = (result: IdempotencyRecord.ReserveResult) => {
  if (result._tag !== "Existing") assert.fail("expected Existing, got Reserved")
  return result
}

/** The typed failure of an exit; fails the test on a success, a defect or an interruption. */
export const failureOf = <A, E>(exit: Exit.Exit<A, E>): E => {
  assert.isTrue(Exit.isFailure(exit), "expected a failure")
  const failure = Cause.failureOption((exit as Exit.Failure<A, E>).cause)
  assert.isTrue(Option.isSome(failure), `not a typed failure: ${Cause.pretty((exit as Exit.Failure<A, E>).cause)}`)
  return (failure as Option.Some<E>).value
}

export const expectFailure = <A, E>(exit: Exit.Exit<A, E>, tag: string, method?: string) => {
  const error = failureOf(exit) as { readonly _tag: string; readonly method?: string }
  assert.strictEqual(error._tag, tag)
  if (method !== undefined) assert.strictEqual(error.method, method)
  return error
}

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
