/**
 * On a Redis Cluster of three masters started here (16384 slots split between them), through an
 * ioredis `Cluster` client: the conformance suite, the admin suite, records spread over every node
 * (each script touches one key, so one slot), and a purge that scans every master.
 */
import { RedisClient, RedisStore } from "@effect-idempotency/redis"
import type { RedisCluster } from "@effect-idempotency/test-support/Redis"
import { redisCluster, requireRedisServer } from "@effect-idempotency/test-support/Redis"
import { AdminConformance, StoreConformance } from "@effect-idempotency/testing"
import { assert, layer } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as TestClock from "effect/TestClock"
import * as TestServices from "effect/TestServices"
import { Cluster } from "ioredis"
import { completeRecord, freshId, recordKey, uniquePrefix } from "./utils/fixtures.js"

class Nodes extends Context.Tag("test/Nodes")<Nodes, RedisCluster>() {}

/** A cluster client with the store's recommended options, on the cluster's first node. */
const clusterClient = (cluster: RedisCluster) =>
  Layer.scoped(
    RedisClient.RedisClient,
    Effect.acquireRelease(
      Effect.sync(() => {
        const client = new Cluster([{ host: "127.0.0.1", port: cluster.ports[0]! }], {
          enableOfflineQueue: false,
          redisOptions: RedisClient.recommendedOptions()
        })
        client.on("error", () => {})
        return RedisClient.RedisClient.of({ client })
      }),
      ({ client }) => Effect.sync(() => client.disconnect())
    )
  )

// started on the live clock: `it.layer` builds its layer with `TestClock`
const ClusterLive = Layer.scoped(
  Nodes,
  TestServices.provideLive(Effect.flatMap(requireRedisServer, (binary) => redisCluster(binary)))
)

const store = (options: RedisStore.Options) =>
  Layer.unwrapEffect(
    Effect.map(Nodes, (nodes) => RedisStore.layerWith(options).pipe(Layer.provideMerge(clusterClient(nodes))))
  )

const Live = Layer.provideMerge(store({ clock: "effect", prefix: uniquePrefix("cluster") }), ClusterLive)

StoreConformance.suite("RedisStore conformance on a Redis Cluster", Live, { concurrency: 200, timeout: "2 minutes" })

// list and stats scan every master, one after the other; the cursor names the master
AdminConformance.suite(
  "RedisStore admin on a Redis Cluster",
  Layer.provideMerge(store({ prefix: uniquePrefix("cluster-admin") }), ClusterLive),
  { timeout: "2 minutes" }
)

layer(Live, { timeout: "2 minutes" })("RedisStore on a Redis Cluster", (it) => {
  it.effect("records spread over every master; a purge scans them all", () =>
    Effect.gen(function*() {
      const { client } = yield* RedisClient.RedisClient
      const cluster = client as Cluster
      const prefix = uniquePrefix("cluster-purge")
      const scoped = yield* RedisStore.make({ clock: "effect", prefix })
      const ids = Array.from({ length: 60 }, () => freshId())
      for (const id of ids) {
        yield* completeRecord(scoped, id, Duration.seconds(10))
      }
      const masters = cluster.nodes("master")
      assert.strictEqual(masters.length, 3)
      const perNode = yield* Effect.forEach(masters, (node) => Effect.promise(() => node.keys(`${prefix}*`)))
      assert.isTrue(
        perNode.every((keys) => keys.length > 0),
        `keys per node: ${perNode.map((k) => k.length).join(", ")}`
      )
      // every record is on exactly one node
      const all = perNode.flat()
      assert.strictEqual(all.length, ids.length)
      assert.deepStrictEqual(new Set(all), new Set(ids.map((id) => recordKey(prefix, id))))

      yield* TestClock.adjust(Duration.seconds(11))
      assert.strictEqual(yield* scoped.purgeExpired({ limit: 25 }), 25)
      assert.strictEqual(yield* scoped.purgeExpired({ limit: 1000 }), ids.length - 25)
      assert.strictEqual(yield* scoped.purgeExpired(), 0)
    }).pipe(Effect.scoped))
})
