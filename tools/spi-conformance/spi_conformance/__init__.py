"""spi-conformance: checks that a model runtime keeps the contract of ModelMesh's model-runtime
interface (schemas/model_runtime.proto) and KServe V2 inference (schemas/kserve_v2.proto) as warm
relies on it. docs/conformance.md says what each check means and how to run the suite."""
