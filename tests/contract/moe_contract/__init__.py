"""CPU harness for the MoE reduce contract between FlashInfer's NVLink combine and vLLM.

FlashInfer's combine sums each token's top-k expert outputs; vLLM's MoERunner must
then skip its own TP all-reduce of the routed output. The harness runs one MoE layer
in real processes (gloo), lets real vLLM code take the reduce decision with the real
prepare/finalize classes, and compares against a dense float32 reference.
"""
