import { defineProject, mergeConfig } from "vitest/config"
import shared from "../../vitest.shared.js"

export default mergeConfig(
  shared,
  defineProject({
    test: {
      name: "queue",
      // the RabbitMQ server of TEST_AMQP_URL, or a rabbitmq-server node started for the run
      globalSetup: ["./test/globalSetup.ts"]
    }
  })
)
