import { defineProject, mergeConfig } from "vitest/config"
import shared from "../../vitest.shared.js"

export default mergeConfig(
  shared,
  defineProject({
    test: {
      name: "platform",
      // DynamoDB Local (when Java is found; required in CI) and dynalite, started as the DynamoDB
      // store's own tests start them
      globalSetup: ["../dynamodb/test/globalSetup.ts"]
    }
  })
)
