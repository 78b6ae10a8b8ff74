import { defineProject, mergeConfig } from "vitest/config"
import shared from "../../vitest.shared.js"

export default mergeConfig(
  shared,
  defineProject({
    test: {
      name: "redis",
      // the Redis server of TEST_REDIS_URL, or a redis-server started once for every test file of this package
      globalSetup: ["./test/globalSetup.ts"]
    }
  })
)
