/**
 * The encryption wrapper's shared cases (test-support's `StoreEncryption`) over the Redis store, on
 * the run's server; the store reads Effect's `Clock`, as the shared suites drive it.
 */
import * as StoreEncryption from "@effect-idempotency/test-support/StoreEncryption"
import { storeLayer, uniquePrefix } from "./utils/fixtures.js"

StoreEncryption.suite("RedisStore encryption", storeLayer({ clock: "effect", prefix: uniquePrefix("encryption") }))
