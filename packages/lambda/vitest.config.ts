import { defineProject, mergeConfig } from "vitest/config"
import shared from "../../vitest.shared.js"

export default mergeConfig(
  shared,
  defineProject({
    test: {
      name: "lambda",
      // DynamoDB Local (when Java is found; required in CI) and dynalite, as the DynamoDB store's
      // own tests start them
      globalSetup: ["../dynamodb/test/globalSetup.ts"]
    }
  })
)
