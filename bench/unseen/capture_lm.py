"""Capture tiny random-weight transformers language models (real third-party code) as zflow
traces, to measure discovery on architectures the shared conformance set does not hold.

usage: python3 capture_lm.py [--small] OUTDIR [ARCH ... | more | third | fourth | fifth | sweep]
       python3 capture_lm.py --list sweep    # print the sweep's architectures, one per line
sweep: every model type of transformers' AutoModel mapping that no list here names (most are
not text models and fail in the script, which says so); an encoder-decoder is captured as its
encoder alone (the text encoder a diffusion pipeline runs).
--small: hidden 32, 2 heads over 1 kv head, 8 ids, f32 only (the committed test fixtures).
Writes OUTDIR/<arch>-f32.npz (CPU, float32) and OUTDIR/<arch>-bf16.npz (CUDA when present,
bfloat16 placed as from_pretrained(torch_dtype=bf16) leaves it: parameters and persistent
buffers bf16, non-persistent buffers as built). Needs torch and transformers; one line per
architecture, failures included."""
import os, signal, sys, traceback
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "capture"))
import zflow_capture  # noqa: E402
from weights import place, randomize  # noqa: E402

COMMON = dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, num_hidden_layers=2,
              intermediate_size=96, vocab_size=128, max_position_embeddings=64, head_dim=16)
# Per-architecture settings: names the config spells its own way, or a construct to turn on.
EXTRA = {
    "gpt_neox": dict(rotary_pct=0.5, use_parallel_residual=True),
    "phi": dict(partial_rotary_factor=0.5),
    "stablelm": dict(partial_rotary_factor=0.25),
    "persimmon": dict(partial_rotary_factor=0.5, qk_layernorm=True),
    "falcon": dict(new_decoder_architecture=False, multi_query=True, parallel_attn=True, alibi=False, head_dim=None),
    "opt": dict(ffn_dim=96, word_embed_proj_dim=64, do_layer_norm_before=True),
    "gptj": dict(n_embd=64, n_head=4, n_layer=2, rotary_dim=8, n_positions=64),
    "codegen": dict(n_embd=64, n_head=4, n_layer=2, rotary_dim=8, n_positions=64, n_ctx=64),
    "gpt_bigcode": dict(n_embd=64, n_head=4, n_layer=2, n_positions=64, multi_query=True, n_inner=96),
    "mpt": dict(d_model=64, n_heads=4, n_layers=2, expansion_ratio=2, max_seq_len=64),
    "cohere": dict(logit_scale=0.5, use_qk_norm=False),
    "olmo": dict(clip_qkv=2.0),
    "glm": dict(partial_rotary_factor=0.5),
    "glm4": dict(partial_rotary_factor=0.5),
    "starcoder2": dict(sliding_window=8, use_bias=True),
    "qwen2": dict(use_sliding_window=False),
    "nemotron": dict(partial_rotary_factor=0.5),
    "gemma": dict(),
    "gemma3_text": dict(sliding_window=8, query_pre_attn_scalar=16),
    "mixtral": dict(num_local_experts=4, num_experts_per_tok=2),
    "qwen2_moe": dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, shared_expert_intermediate_size=48),
    "biogpt": dict(),
    "gpt_neo": dict(attention_types=[[["global", "local"], 1]], window_size=4, num_layers=2, intermediate_size=96),
    "olmoe": dict(num_experts=4, num_experts_per_tok=2),
    "dbrx": dict(d_model=64, n_heads=4, n_layers=2, ffn_config={"ffn_hidden_size": 96, "moe_num_experts": 4, "moe_top_k": 2},
                 attn_config={"kv_n_heads": 2, "clip_qkv": 2.0, "rope_theta": 10000.0}),
    "granitemoe": dict(num_local_experts=4, num_experts_per_tok=2, embedding_multiplier=2.0, residual_multiplier=0.5,
                       attention_multiplier=0.0625, logits_scaling=1.0),
    "jetmoe": dict(num_local_experts=4, num_experts_per_tok=2, kv_channels=16),
    "phimoe": dict(num_local_experts=4, num_experts_per_tok=2),
    "qwen3_moe": dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32),
    "deepseek_v2": dict(n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, n_shared_experts=1,
                        kv_lora_rank=16, q_lora_rank=None, qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=16, first_k_dense_replace=1),
    "deepseek_v3": dict(n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, n_shared_experts=1, n_group=1, topk_group=1,
                        kv_lora_rank=16, q_lora_rank=24, qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=16, first_k_dense_replace=1),
    "gpt_oss": dict(num_local_experts=4, num_experts_per_tok=2, sliding_window=8),
    "glm4_moe": dict(n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, n_shared_experts=1, first_k_dense_replace=1,
                     partial_rotary_factor=0.5, n_group=1, topk_group=1),
    "cohere2": dict(sliding_window=8),
    "llama4_text": dict(num_local_experts=4, num_experts_per_tok=1, intermediate_size_mlp=96),
    "hunyuan_v1_moe": dict(num_experts=4, moe_topk=2),
    "ernie4_5_moe": dict(moe_num_experts=4, moe_k=2, moe_intermediate_size=32, moe_layer_start_index=1),
    "dots1": dict(n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, n_shared_experts=1, first_k_dense_replace=1),
    "falcon_new": dict(_type="falcon", new_decoder_architecture=True, num_kv_heads=2, parallel_attn=True, head_dim=None),
    "falcon_alibi": dict(_type="falcon", alibi=True, new_decoder_architecture=False, multi_query=True, parallel_attn=True, head_dim=None),
    "mpt_alibi": dict(_type="mpt", d_model=64, n_heads=4, n_layers=2, expansion_ratio=2, max_seq_len=64, attn_config={"alibi": True}),
    "granite_mult": dict(_type="granite", embedding_multiplier=2.0, residual_multiplier=0.5, attention_multiplier=0.0625),
    "xglm": dict(d_model=64, attention_heads=4, num_layers=2, ffn_dim=96),
    "granitemoeshared": dict(num_local_experts=4, num_experts_per_tok=2, shared_intermediate_size=48),
    "minimax": dict(num_local_experts=4, num_experts_per_tok=2),
    "minimax_m2": dict(num_local_experts=4, num_experts_per_tok=2),
    "afmoe": dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32),
    "qwen3_next": dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, shared_expert_intermediate_size=48),
    # Local attention windows small enough that 12 ids are not padded to 512 rows.
    "led": dict(attention_window=4),
    "longformer": dict(attention_window=4),
    "ctrl": dict(n_embd=64, n_head=4, n_layer=2, dff=96, n_positions=64),
    "openai-gpt": dict(n_embd=64, n_head=4, n_layer=2, n_positions=64),
    "distilbert": dict(dim=64, n_heads=4, n_layers=2, hidden_dim=96),
    "albert": dict(embedding_size=32),
    "lfm2_moe": dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32),
    "jamba": dict(num_experts=4, num_experts_per_tok=2),
    "mamba2": dict(num_heads=8, head_dim=16, n_groups=2, state_size=16, expand=2),
    "zamba": dict(attention_hidden_size=128, mamba_d_state=16, n_mamba_heads=2, num_hidden_layers=3, attn_layer_period=2,
                  attn_layer_offset=1),
    "rwkv": dict(attention_hidden_size=64, context_length=64),
    "funnel": dict(block_sizes=[1, 1], d_model=64, n_head=4, d_head=16, d_inner=96),
    "mobilebert": dict(embedding_size=32, intra_bottleneck_size=32, num_feedforward_networks=2),
    "xlm": dict(emb_dim=64, n_layers=2, n_heads=4),
    "flaubert": dict(emb_dim=64, n_layers=2, n_heads=4),
    "longcat_flash": dict(n_routed_experts=4, moe_topk=2, expert_ffn_hidden_size=32, ffn_hidden_size=96, kv_lora_rank=16,
                          q_lora_rank=24, qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=16, num_layers=1),
}
# A second batch: mixtures of experts, local/sliding attention, clipped q/k/v, parallel blocks.
MORE = ["gpt_neo", "olmoe", "dbrx", "granitemoe", "jetmoe", "phimoe", "qwen3_moe", "deepseek_v2", "deepseek_v3",
        "gpt_oss", "glm4_moe", "cohere2", "bitnet", "llama4_text", "hunyuan_v1_moe", "ernie4_5_moe", "dots1",
        "doge", "olmo3", "vaultgemma", "flex_olmo", "falcon_new", "falcon_alibi", "mpt_alibi", "granite_mult"]
# A third batch: more families, mixtures of experts and latent attention among them.
# (exaone_moe and blt were tried too: their default configs give traces of gigabytes whatever
# COMMON says; deepseek_v3 and longcat_flash fail in the script with these settings.)
THIRD = ["deepseek_v3", "llama", "granitemoeshared", "diffllama", "gpt_neox_japanese", "aria_text", "minimax",
         "minimax_m2", "afmoe", "longcat_flash", "cwm", "qwen3_next", "nanochat", "lfm2"]
# A fourth batch: encoders (bidirectional, absolute or rotary positions, relative attention),
# the first GPTs, hybrids with state-space or recurrent layers, and the earlier batches' misses.
FOURTH = ["ctrl", "openai-gpt", "bert", "roberta", "modernbert", "electra", "distilbert", "albert",
          "xlm-roberta", "deberta-v2", "megatron-bert", "roformer", "esm", "ernie", "gemma3n_text",
          "lfm2_moe", "falcon_h1", "jamba", "bamba", "granitemoehybrid", "zamba2", "recurrent_gemma",
          "nemotron_h", "apertus", "gpt_neox_japanese", "nanochat", "jetmoe", "minimax", "qwen3_next", "xglm"]
# A fifth batch: the families no earlier batch holds (pure state-space and recurrent
# language models, and more encoders: relative position biases, bottlenecks, grouped
# convolutions, Fourier mixing, landmark and block-sparse attention).
FIFTH = ["mamba", "mamba2", "falcon_mamba", "zamba", "rwkv", "xlstm", "camembert", "data2vec-text", "mpnet",
         "funnel", "mobilebert", "squeezebert", "convbert", "fnet", "big_bird", "nystromformer", "rembert",
         "ibert", "luke", "splinter", "layoutlm", "xlm", "flaubert", "mra", "yoso", "bert-generation",
         "gemma2", "mistral", "gpt2", "bloom", "exaone4", "t5gemma"]
DEFAULT = ["qwen2", "qwen3", "phi", "phi3", "gpt_neox", "falcon", "opt", "stablelm", "olmo", "olmo2",
           "cohere", "starcoder2", "gptj", "gpt_bigcode", "mpt", "persimmon", "gemma", "gemma3_text",
           "nemotron", "glm", "glm4", "smollm3", "codegen", "helium", "exaone4", "mixtral", "qwen2_moe",
           "biogpt", "xglm", "ernie4_5", "arcee", "apertus", "seed_oss", "hunyuan_v1_dense", "ministral"]


def sweep():
    """The AutoModel model types no batch above names, in a stable order."""
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES
    seen = set(MORE + THIRD + FOURTH + FIFTH + DEFAULT)
    seen |= {v.get("_type", k) for k, v in EXTRA.items()}
    return sorted(t for t in MODEL_MAPPING_NAMES if t not in seen)


# A sweep model bigger than this is a default config that ignores COMMON's sizes: refused
# rather than written (the traces are shipped back from the device).
MAX_PARAMS = 3_000_000


def clamps(arch):
    """Sizes a default config sets past COMMON's names (expert counts, expert and latent widths,
    vocabularies): each such integer setting of the default config, cut to a tiny value."""
    from transformers import AutoConfig
    cfg = AutoConfig.for_model(arch).to_dict()
    out = {}
    for k, v in cfg.items():
        if not isinstance(v, int) or isinstance(v, bool) or k in COMMON:
            continue
        if "expert" in k and "per_tok" not in k and "topk" not in k and v > 4:
            out[k] = 4 if "shared" not in k else 1
        elif "vocab" in k and v > 128:
            out[k] = 128
        elif (k.endswith("intermediate_size") or k.endswith("_rank")) and v > 128:
            out[k] = 32
        elif k.endswith("head_dim") and v > 16:
            out[k] = 16
    return out


def build(arch, small=False):
    from transformers import AutoConfig, AutoModel
    kw = dict(COMMON)
    if os.environ.get("CAPTURE_CLAMP"):
        kw.update(clamps(arch))
    kw.update(EXTRA.get(arch, {}))
    if small:
        kw.update({k: v for k, v in SMALL.items() if k in kw or k in COMMON})
    kw = {k: v for k, v in kw.items() if not (k == "head_dim" and v is None)}
    kw.update(pad_token_id=0, bos_token_id=1, eos_token_id=2)
    cfg = AutoConfig.for_model(kw.pop("_type", arch), **kw)
    if hasattr(cfg, "use_cache"):
        cfg.use_cache = False
    torch.manual_seed(0)
    try:
        model = AutoModel.from_config(cfg, attn_implementation="sdpa")
    except ValueError:  # an architecture without an SDPA path runs its own (eager) attention
        model = AutoModel.from_config(cfg, attn_implementation="eager")
    if getattr(cfg, "is_encoder_decoder", False) and hasattr(model, "get_encoder"):
        model = model.get_encoder()
    n = sum(p.numel() for p in model.parameters())
    if n > MAX_PARAMS:
        raise ValueError(f"{n} parameters: its config ignores the small sizes")
    randomize(model, torch.Generator().manual_seed(1))
    return model.eval(), cfg


SMALL = dict(hidden_size=32, num_attention_heads=2, num_key_value_heads=1, intermediate_size=48, vocab_size=64,
             n_embd=32, n_head=2, n_inner=48, d_model=32, n_heads=2, ffn_dim=48, word_embed_proj_dim=32,
             moe_intermediate_size=16, shared_expert_intermediate_size=24)


def capture(arch, outdir, small=False):
    n = 8 if small else 12
    ids = torch.randint(0, 64 if small else 128, (1, n), generator=torch.Generator().manual_seed(2))
    done = []
    runs = [("f32", torch.float32, "cpu"), ("bf16", torch.bfloat16, "cuda" if torch.cuda.is_available() else "cpu")]
    for tag, dtype, device in runs[:1] if small else runs:
        model, cfg = build(arch, small)
        model = place(model, dtype, device)
        path = os.path.join(outdir, f"{arch}-{tag}.npz")
        prod = {"case": arch, "library": "transformers", "model_type": cfg.model_type}
        with zflow_capture.Capture(model, name="text_encoder", path=path, producer=prod) as cap:
            x = ids.to(device)
            cap.input("input_ids", x)
            with torch.no_grad():
                out = model(input_ids=x, use_cache=False) if "use_cache" in model.forward.__code__.co_varnames else model(input_ids=x)
            h = out.last_hidden_state if hasattr(out, "last_hidden_state") else out[0]
            cap.output("hidden", h)
        done.append(f"{tag} {cap.summary['calls']} calls")
    return ", ".join(done)


def _timeout(signum, frame):
    raise TimeoutError("over CAPTURE_TIMEOUT")


def main():
    signal.signal(signal.SIGALRM, _timeout)
    args = sys.argv[1:]
    if args[:1] == ["--list"]:
        print("\n".join(sweep()))
        return
    small = "--small" in args
    args = [a for a in args if a != "--small"]
    outdir = args[0]
    os.makedirs(outdir, exist_ok=True)
    import transformers
    print("torch", torch.__version__, "transformers", transformers.__version__, flush=True)
    cases = args[1:] or DEFAULT
    if cases == ["more"]:
        cases = MORE
    if cases == ["third"]:
        cases = THIRD
    if cases == ["fourth"]:
        cases = FOURTH
    if cases == ["fifth"]:
        cases = FIFTH
    if cases == ["sweep"]:
        cases = sweep()
    limit = int(os.environ.get("CAPTURE_TIMEOUT", "0"))  # seconds per architecture, 0: none
    for arch in cases:
        try:
            if limit:
                signal.alarm(limit)
            print(f"{arch:18s} ok   {capture(arch, outdir, small)}", flush=True)
        except Exception as e:
            msg = "".join(traceback.format_exception_only(type(e), e)).strip().splitlines()[-1]
            print(f"{arch:18s} FAIL {msg[:200]}", flush=True)
        finally:
            signal.alarm(0)


if __name__ == "__main__":
    main()
