import { defineProject, mergeConfig } from "vitest/config"
import shared from "../vitest.shared.js"

export default mergeConfig(
  shared,
  defineProject({
    test: {
      name: "examples",
      // DynamoDB Local (when Java is found; required in CI) and dynalite, started as the DynamoDB
      // store's own tests start them; the Redis server of TEST_REDIS_URL, or a redis-server started
      // as the Redis store's tests start it; the brokers of the order consumers (TEST_AMQP_URL and
      // TEST_NATS_URL, or a rabbitmq-server and a nats-server started for the run)
      globalSetup: [
        "../packages/dynamodb/test/globalSetup.ts",
        "../packages/redis/test/globalSetup.ts",
        "./test/globalSetup.ts"
      ]
    }
  })
)
