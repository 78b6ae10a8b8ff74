/**
 * The Redis store of a target.
 *
 * @internal
 */
import { IdempotencyAdmin } from "@effect-idempotency/core"
import { RedisClient, RedisStore } from "@effect-idempotency/redis"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { InvalidStore } from "../../CliError.js"
import type { MigrateResult, StoreTarget } from "../../StoreTarget.js"
import { StoreSchema } from "../../StoreTarget.js"
import { connectionName } from "./shared.js"

/** @internal */
export const layer = (target: Extract<StoreTarget, { readonly _tag: "Redis" }>) => {
  const prefix = target.prefix ?? RedisStore.defaultPrefix
  const store = RedisStore.layerWith({ prefix }).pipe(
    Layer.mapError((error) => new InvalidStore({ reason: error.message }))
  )
  return Layer.merge(
    IdempotencyAdmin.layer.pipe(Layer.provideMerge(store)),
    Layer.succeed(StoreSchema, {
      migrate: Effect.succeed<MigrateResult>({
        store: "Redis",
        applied: false,
        created: undefined,
        detail: `Redis has no schema to create: each record is a key under the prefix ${prefix}`
      })
    })
  ).pipe(Layer.provide(RedisClient.layer({ url: target.url, connectionName })))
}
