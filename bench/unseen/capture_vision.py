"""Capture tiny random-weight vision and audio encoders (real third-party code: transformers'
AutoModel types and timm's models) as zflow traces: transformer-shaped models whose request is
not token ids but pixels, frames, spectrograms or waveforms (the image and audio encoders that
diffusion and multimodal pipelines run beside their DiT).

usage: python3 capture_vision.py [--small] OUTDIR [ARCH ...]   # default: every case of the first batch
       python3 capture_vision.py OUTDIR more                     # the second batch (MORE_HF, MORE_TIMM, CLASSES)
       python3 capture_vision.py OUTDIR third                    # the third batch (THIRD_HF, THIRD_TIMM: hierarchical,
                                                                 # hybrid and token-mixing encoders)
       python3 capture_vision.py OUTDIR fourth                   # the fourth batch (FOURTH_HF, FOURTH_TIMM: conv-token,
                                                                 # pooling and focal mixers, audio relative attention)
       python3 capture_vision.py OUTDIR fifth                    # the fifth batch (FIFTH_HF, FIFTH_CLASSES, FIFTH_TIMM:
                                                                 # convolutional networks, more vision towers)
       python3 capture_vision.py OUTDIR sixth                    # the sixth batch (SIXTH_TIMM, SIXTH_CLASSES: dense,
                                                                 # dual-path, split-attention and halo networks, towers)
       python3 capture_vision.py --list [more|third|fourth|fifth|sixth]  # a batch's cases, one per line
--small: hidden 32 over 2 heads, f32 only (the committed test fixtures; timm's and the Qwen-VL
towers' widths too).
Writes OUTDIR/<case>-f32.npz (CPU, float32) and OUTDIR/<case>-bf16.npz (CUDA when present,
bfloat16 placed as from_pretrained(torch_dtype=bf16) leaves it), one forward pass (scope s0),
input "pixel_values" (or the model's main input name), output "hidden" (the last hidden state,
or timm's unpooled tokens). Weights redrawn as the conformance traces' (weights.randomize).
Needs torch 2.x, transformers and timm; one line per case, failures included (CAPTURE_TRACEBACK=1
adds a failure's last frames; CAPTURE_TIMEOUT, default 60, limits each case's seconds)."""
import inspect, os, signal, sys, traceback

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "capture"))
import zflow_capture  # noqa: E402
from weights import place, randomize  # noqa: E402

# A ViT at the conformance traces' sizes: hidden 64, 4 heads, 2 layers, 32×32 pixels in 8×8 patches.
VIT = dict(hidden_size=64, num_attention_heads=4, num_hidden_layers=2, intermediate_size=96,
           image_size=32, patch_size=8, num_channels=3)
# transformers cases: model type → config settings (VIT's names the type spells its own way, or a
# construct turned on).
HF = {
    "vit": {},
    "deit": {},
    "vit_msn": {},
    "ijepa": {},
    "vit_mae": dict(mask_ratio=0.0),
    "dinov2": dict(layerscale_value=0.5),
    "dinov2_with_registers": dict(layerscale_value=0.5, num_register_tokens=2),
    "dinov3_vit": dict(num_register_tokens=2, layerscale_value=0.5),
    "beit": dict(use_relative_position_bias=True, use_mean_pooling=False, layer_scale_init_value=0.5),
    "data2vec-vision": dict(use_relative_position_bias=True, layer_scale_init_value=0.5),
    "clip_vision_model": {},
    "siglip_vision_model": {},
    "chinese_clip_vision_model": {},
    "aimv2_vision_model": {},
    "pixtral": dict(head_dim=16),
    "yolos": dict(num_detection_tokens=4, image_size=[32, 32]),
    "vitdet": dict(window_block_indices=[0], residual_block_indices=[], use_relative_position_embeddings=True,
                   window_size=2, pretrain_image_size=32),
    "vivit": dict(num_frames=4, tubelet_size=[2, 8, 8], image_size=32),
    "videomae": dict(num_frames=4, tubelet_size=2),
    "timesformer": dict(num_frames=4),
    "swin": dict(_drop=("hidden_size", "num_attention_heads", "num_hidden_layers"), embed_dim=32, depths=[2, 1],
                 num_heads=[2, 4], window_size=2, patch_size=4, mlp_ratio=1.5),
    "audio-spectrogram-transformer": dict(patch_size=8, frequency_stride=8, time_stride=8, max_length=32,
                                          num_mel_bins=16),
    "whisper": dict(d_model=64, encoder_attention_heads=4, encoder_layers=2, encoder_ffn_dim=96, num_mel_bins=16,
                    max_source_positions=8, decoder_layers=1, decoder_attention_heads=4, decoder_ffn_dim=96,
                    vocab_size=128, pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=1),
    "wav2vec2": dict(conv_dim=[32, 32], conv_kernel=[10, 3], conv_stride=[5, 2], num_conv_pos_embeddings=16,
                     num_conv_pos_embedding_groups=4),
    "hubert": dict(conv_dim=[32, 32], conv_kernel=[10, 3], conv_stride=[5, 2], num_conv_pos_embeddings=16,
                   num_conv_pos_embedding_groups=4),
    "wavlm": dict(conv_dim=[32, 32], conv_kernel=[10, 3], conv_stride=[5, 2], num_conv_pos_embeddings=16,
                  num_conv_pos_embedding_groups=4, num_buckets=16, max_bucket_distance=32),
    "data2vec-audio": dict(conv_dim=[32, 32], conv_kernel=[10, 3], conv_stride=[5, 2],
                           num_conv_pos_embeddings=5, num_conv_pos_embedding_groups=4, conv_pos_kernel_size=5,
                           num_conv_pos_embeddings_layers=1),
}
# timm cases: model name → constructor settings (the same sizes; global_pool '' keeps every token).
TIMM_SIZES = dict(img_size=32, patch_size=8, embed_dim=64, depth=2, num_heads=4, num_classes=0, global_pool="")
TIMM = {
    "timm_vit": ("vit_base_patch16_224", dict(mlp_ratio=1.5)),
    "timm_vit_reg_dinov2": ("vit_base_patch14_reg4_dinov2", dict(mlp_ratio=1.5, init_values=0.5)),
    "timm_vit_siglip": ("vit_base_patch16_siglip_224", dict(mlp_ratio=1.5)),
    "timm_eva02": ("eva02_base_patch14_224", dict(mlp_ratio=1.5)),
}
# The second batch: encoders the first batch's forms were not built on (SAM's neck and decomposed
# relative positions, hierarchical and sequence-reduction encoders, the Qwen-VL vision towers'
# merged patches and windows, conformers and conv-subsampled audio, video with 3-D RoPE).
NO_VIT = ("hidden_size", "num_attention_heads", "num_hidden_layers", "intermediate_size")
STAGES = dict(_drop=NO_VIT, num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[32, 64],
              patch_sizes=[7, 3], strides=[4, 2], num_attention_heads=[1, 2], mlp_ratios=[2, 2])
MORE_HF = {
    "sam_vision_model": dict(mlp_dim=96, output_channels=32, window_size=2, global_attn_indexes=[1],
                             use_rel_pos=True),
    "swinv2": dict(_drop=NO_VIT, embed_dim=32, depths=[2, 1], num_heads=[2, 4], window_size=2, patch_size=4,
                   mlp_ratio=1.5),
    "segformer": STAGES,
    "pvt_v2": STAGES,
    "blip_vision_model": {},
    "owlv2_vision_model": {},
    "idefics3_vision": {},
    "siglip2_vision_model": dict(num_patches=16),
    "vjepa2": dict(crop_size=32, frames_per_clip=4, tubelet_size=2, mlp_ratio=1.5, pred_hidden_size=32,
                   pred_num_attention_heads=2, pred_num_hidden_layers=1, pred_num_mask_tokens=2),
    "speech_to_text": dict(d_model=64, encoder_layers=2, encoder_attention_heads=4, encoder_ffn_dim=96,
                           decoder_layers=1, decoder_attention_heads=4, decoder_ffn_dim=96, vocab_size=128,
                           input_feat_per_channel=16, num_conv_layers=2, conv_channels=32, conv_kernel_sizes=[5, 5],
                           max_source_positions=64, max_target_positions=64),
    "wav2vec2-conformer": dict(conv_dim=[32, 32], conv_kernel=[10, 3], conv_stride=[5, 2],
                               position_embeddings_type="rotary", conv_depthwise_kernel_size=3),
    "wav2vec2-bert": dict(feature_projection_input_dim=32, position_embeddings_type="rotary",
                          conv_depthwise_kernel_size=3, output_hidden_size=64, add_adapter=False),
    "moonshine": dict(encoder_num_hidden_layers=2, decoder_num_hidden_layers=1, encoder_num_attention_heads=4,
                      decoder_num_attention_heads=4, vocab_size=128, partial_rotary_factor=0.5),
}
MORE_TIMM = {
    "timm_deit3": ("deit3_small_patch16_224", dict(mlp_ratio=1.5)),
    "timm_cait": ("cait_xxs24_224", dict(mlp_ratio=1.5)),
    "timm_xcit": ("xcit_nano_12_p16_224", dict(mlp_ratio=1.5)),
    "timm_convit": ("convit_tiny", dict(mlp_ratio=1.5, local_up_to_layer=1)),
    "timm_vit_relpos": ("vit_relpos_base_patch16_224", dict(mlp_ratio=1.5)),
    "timm_vit_rope_mixed": ("vit_base_patch16_rope_mixed_224", dict(mlp_ratio=1.5)),
    "timm_samvit": ("samvit_base_patch16", dict(mlp_ratio=1.5, window_size=2, global_attn_indexes=[1],
                                                use_rel_pos=True)),
    "timm_pe_core": ("vit_pe_core_base_patch16_224", dict(mlp_ratio=1.5)),
}
# Towers AutoModel does not build from a model type: (module, model class, config class, settings).
# Their request is flattened patches [N, C·t·p·p] and a grid_thw of [[1, 8, 8]] patches.
QWEN_VIS = dict(depth=2, num_heads=4, in_channels=3, patch_size=8, spatial_merge_size=2, temporal_patch_size=2)
CLASSES = {
    "qwen2_vl_vision": ("qwen2_vl", "Qwen2VisionTransformerPretrainedModel", "Qwen2VLVisionConfig",
                        dict(QWEN_VIS, embed_dim=64, hidden_size=64, mlp_ratio=2)),
    "qwen2_5_vl_vision": ("qwen2_5_vl", "Qwen2_5_VisionTransformerPretrainedModel", "Qwen2_5_VLVisionConfig",
                          dict(QWEN_VIS, hidden_size=64, intermediate_size=96, out_hidden_size=64, window_size=32,
                               fullatt_block_indexes=[1])),
    "qwen3_vl_vision": ("qwen3_vl", "Qwen3VLVisionModel", "Qwen3VLVisionConfig",
                        dict(QWEN_VIS, hidden_size=64, intermediate_size=96, out_hidden_size=64,
                             num_position_embeddings=16, deepstack_visual_indexes=[0])),
}
# The third batch: hierarchical, hybrid and token-mixing encoders (timm's families beyond the ViT and
# transformers' conv-attention hybrids). A timm case is (model name or "module:Class", settings, image
# side); settings are the whole constructor's (TIMM_SIZES only where "_vit" says so), "_cfg" a config
# object built first ("module:Class", settings).
STAGE4 = dict(depths=(1, 1, 1, 1))
VIT_LIKE = dict(_vit=True, mlp_ratio=1.5)
THIRD_TIMM = {
    "timm_twins_svt": ("twins_svt_small", dict(img_size=32, patch_size=4, embed_dims=(32, 64), num_heads=(1, 2),
                                               mlp_ratios=(2, 2), depths=(1, 1), sr_ratios=(2, 1), wss=(2, 2)), 32),
    "timm_twins_pcpvt": ("twins_pcpvt_small", dict(img_size=32, patch_size=4, embed_dims=(32, 64), num_heads=(1, 2),
                                                   mlp_ratios=(2, 2), depths=(1, 1), sr_ratios=(2, 1)), 32),
    "timm_crossvit": ("crossvit_tiny_240", dict(img_size=48, img_scale=(1.0, 1.0), patch_size=[12, 16],
                                                embed_dim=[32, 64], depth=[[1, 1, 0]], num_heads=[2, 2],
                                                mlp_ratio=[2, 2, 1], num_classes=8), 48),
    "timm_pit": ("pit_ti_224", dict(img_size=32, patch_size=8, stride=4, base_dims=[16, 16], depth=[1, 1],
                                    heads=[2, 4], mlp_ratio=2), 32),
    "timm_coat_lite": ("coat_lite_tiny", dict(img_size=64, patch_size=4, embed_dims=(16, 32, 32, 64),
                                              serial_depths=(1, 1, 1, 1), num_heads=4, mlp_ratios=(2, 2, 2, 2),
                                              crpe_window={3: 2, 5: 1, 7: 1}), 64),
    "timm_coat": ("coat_tiny", dict(img_size=64, patch_size=4, embed_dims=(16, 32, 32, 32),
                                    serial_depths=(1, 1, 1, 1), parallel_depth=1, num_heads=4,
                                    mlp_ratios=(2, 2, 2, 2), crpe_window={3: 2, 5: 1, 7: 1}), 64),
    "timm_efficientformer": ("efficientformer_l1", dict(depths=(1, 1, 1, 2), embed_dims=(16, 24, 32, 48),
                                                        num_vit=1, mlp_ratios=2), 224),
    "timm_efficientformerv2": ("efficientformerv2_s0", dict(img_size=64, depths=(1, 1, 1, 1),
                                                            embed_dims=(16, 24, 32, 48), num_vit=1), 64),
    "timm_tiny_vit": ("tiny_vit_5m_224", dict(embed_dims=(16, 32, 32, 64), num_heads=(1, 2, 2, 4),
                                              window_sizes=(2, 2, 2, 2), mlp_ratio=2, **STAGE4), 64),
    "timm_gcvit": ("timm.models.gcvit:GlobalContextVit", dict(img_size=64, embed_dim=16, num_heads=(1, 2, 4, 4), mlp_ratio=2, **STAGE4), 64),
    "timm_davit": ("davit_tiny", dict(embed_dims=(16, 32, 64, 128), num_heads=(1, 2, 4, 8), window_size=2,
                                      mlp_ratio=2, **STAGE4), 64),
    "timm_mvitv2": ("timm.models.mvitv2:MultiScaleVit", dict(img_size=64, _cfg=(
        "timm.models.mvitv2:MultiScaleVitCfg", dict(embed_dim=16, num_heads=1, mlp_ratio=2, **STAGE4))), 64),
    "timm_hiera": ("hiera_tiny_224", dict(img_size=64, embed_dim=16, num_heads=1, stages=(1, 1, 1, 1), mlp_ratio=2), 64),
    "timm_volo": ("timm.models.volo:VOLO", dict(img_size=32, layers=(1, 1), embed_dims=(32, 64), num_heads=(1, 2),
                                      outlook_attention=(True, False), downsamples=(True, False), mlp_ratio=2,
                                      stem_hidden_dim=16, use_aux_head=False), 32),
    "timm_nest": ("timm.models.nest:Nest", dict(img_size=32, patch_size=4, num_levels=3, embed_dims=(16, 32, 64),
                                    num_heads=(1, 2, 4), depths=(1, 1, 1), mlp_ratio=2), 32),
    "timm_tnt": ("tnt_s_patch16_224", dict(img_size=32, patch_size=8, embed_dim=64, inner_dim=16, depth=2,
                                           num_heads_inner=2, num_heads_outer=4, mlp_ratio=2), 32),
    "timm_visformer": ("visformer_tiny", dict(img_size=64, init_channels=16, embed_dim=64, depth=(1, 1, 1),
                                              num_heads=2, mlp_ratio=2), 64),
    "timm_edgenext": ("edgenext_xx_small", dict(dims=(16, 32, 48, 64), global_block_counts=(0, 1, 1, 1),
                                                heads=(2, 2, 2, 2), d2_scales=(2, 2, 3, 4), **STAGE4), 64),
    "timm_mobilevit": ("mobilevit_xxs", {}, 64),
    "timm_mobilevitv2": ("mobilevitv2_050", {}, 64),
    "timm_caformer": ("timm.models.metaformer:MetaFormer", dict(dims=(16, 32, 64, 128), token_mixers=(
        "@timm.models.metaformer:SepConv", "@timm.models.metaformer:SepConv", "@timm.models.metaformer:Attention",
        "@timm.models.metaformer:Attention"), **STAGE4), 64),
    "timm_efficientvit_b": ("efficientvit_b0", dict(widths=(8, 16, 32, 64, 128), depths=(1, 1, 1, 1, 1),
                                                    head_dim=16), 64),
    "timm_efficientvit_m": ("efficientvit_m0", dict(img_size=64, embed_dim=(16, 32, 48), key_dim=(8, 8, 8),
                                                    depth=(1, 1, 1), num_heads=(2, 2, 2), window_size=(2, 2, 2)), 64),
    "timm_swin": ("swin_tiny_patch4_window7_224", dict(img_size=32, patch_size=4, embed_dim=32, depths=(2, 2),
                                                       num_heads=(2, 4), window_size=2, mlp_ratio=2), 32),
    "timm_swinv2_cr": ("swinv2_cr_tiny_ns_224", dict(img_size=32, patch_size=4, embed_dim=32, depths=(2, 2),
                                                     num_heads=(2, 4), window_size=2, mlp_ratio=2), 32),
    "timm_levit": ("timm.models.levit:LevitDistilled", dict(img_size=64, embed_dim=(32, 48, 64),
                                                            key_dim=8, num_heads=(2, 3, 4), depth=(1, 1, 1),
                                                            mlp_ratio=2, attn_ratio=2), 64),
    "timm_levit_conv": ("timm.models.levit:LevitDistilled", dict(img_size=64, embed_dim=(32, 48, 64),
                                                                 key_dim=8, num_heads=(2, 3, 4), depth=(1, 1, 1),
                                                                 mlp_ratio=2, attn_ratio=2, use_conv=True), 64),
    "timm_mixer": ("timm.models.mlp_mixer:MlpMixer", dict(img_size=32, patch_size=8, num_blocks=2, embed_dim=64), 32),
    "timm_gmlp": ("timm.models.mlp_mixer:MlpMixer", dict(
        img_size=32, patch_size=8, num_blocks=2, embed_dim=64, mlp_ratio=6,
        block_layer="@timm.models.mlp_mixer:SpatialGatingBlock", mlp_layer="@timm.layers:GatedMlp"), 32),
    "timm_resmlp": ("timm.models.mlp_mixer:MlpMixer", dict(
        img_size=32, patch_size=8, num_blocks=2, embed_dim=64, mlp_ratio=4,
        block_layer="@timm.models.mlp_mixer:ResBlock", norm_layer="@timm.models.mlp_mixer:Affine"), 32),
    "timm_vit_parallel": ("vit_small_patch16_18x2_224", VIT_LIKE, 32),
    "timm_vit_gap": ("vit_medium_patch16_gap_256", VIT_LIKE, 32),
    "timm_deit_distilled": ("deit_tiny_distilled_patch16_224", dict(VIT_LIKE, global_pool="token"), 32),
    "timm_beitv2": ("beitv2_base_patch16_224", VIT_LIKE, 32),
    "timm_vit_rpn": ("vit_base_patch16_rpn_224", VIT_LIKE, 32),
    "timm_vit_srelpos": ("vit_srelpos_small_patch16_224", VIT_LIKE, 32),
    "timm_vit_pwee": ("vit_pwee_patch16_reg1_gap_256", VIT_LIKE, 32),
    "timm_vit_betwixt": ("vit_betwixt_patch16_reg4_gap_256", VIT_LIKE, 32),
    "timm_vit_quickgelu": ("vit_base_patch16_clip_quickgelu_224", VIT_LIKE, 32),
    "timm_vit_intern": ("vit_intern300m_patch14_448", VIT_LIKE, 32),
    "timm_aimv2": ("aimv2_large_patch14_224", VIT_LIKE, 32),
    "timm_vit_rope_reg": ("vit_base_patch16_rope_reg1_gap_256", VIT_LIKE, 32),
    "timm_test_vit": ("test_vit", dict(img_size=32), 32),
    "timm_test_vit2": ("test_vit2", dict(img_size=32), 32),
    "timm_test_vit3": ("test_vit3", dict(img_size=32), 32),
    "timm_test_vit4": ("test_vit4", dict(img_size=32), 32),
}
THIRD_HF = {
    "levit": dict(_drop=NO_VIT, image_size=64, patch_size=16, hidden_sizes=[32, 48, 64], num_attention_heads=[2, 3, 4],
                  depths=[1, 1, 1], key_dim=[8, 8, 8], mlp_ratio=[2, 2, 2], attention_ratio=[2, 2, 2],
                  down_ops=[["Subsample", 8, 4, 4, 2, 2], ["Subsample", 8, 6, 4, 2, 2]]),
    "mobilevit": dict(_drop=NO_VIT, image_size=64, patch_size=2, hidden_sizes=[32, 48, 64], num_attention_heads=2,
                      neck_hidden_sizes=[8, 16, 24, 32, 40, 48, 96]),
    "mobilevitv2": dict(_drop=NO_VIT, image_size=64, patch_size=2, width_multiplier=0.5, n_attn_blocks=[1, 1, 1]),
    "hiera": dict(_drop=NO_VIT + ("patch_size",), image_size=[64, 64], embed_dim=16, num_heads=[1, 2, 4, 8], depths=[1, 1, 1, 1]),
    "swiftformer": dict(_drop=NO_VIT, image_size=64, depths=[1, 1, 1, 1], embed_dims=[16, 24, 32, 48]),
    "donut-swin": dict(_drop=NO_VIT, embed_dim=32, depths=[2, 1], num_heads=[2, 4], window_size=2, patch_size=4,
                       mlp_ratio=1.5),
    "swin2sr": dict(_drop=NO_VIT, embed_dim=32, depths=[2, 1], num_heads=[2, 2], window_size=4, mlp_ratio=1.5,
                    image_size=16, upscale=2, patch_size=1),
    "internvl_vision": dict(use_qk_norm=True, layer_scale_init_value=0.5, use_mean_pooling=False),
    "patchtst": dict(_drop=NO_VIT + ("image_size", "patch_size", "num_channels"), num_input_channels=3,
                     context_length=32, patch_length=8, patch_stride=8, d_model=64, num_attention_heads=4,
                     num_hidden_layers=2, ffn_dim=96),
}
HF.update(MORE_HF)
TIMM.update(MORE_TIMM)
MORE = list(MORE_HF) + list(MORE_TIMM) + list(CLASSES)
# The fourth batch: convolutional-token and pooling mixers, focal modulation, group tokens, disentangled and
# relative-position audio attention, hybrid conv stems, cosine window attention with a log-spaced position MLP.
AUDIO_CONV = dict(conv_dim=[32, 32], conv_kernel=[10, 3], conv_stride=[5, 2], num_conv_pos_embeddings=16,
                  num_conv_pos_embedding_groups=4)
PYRAMID = dict(_drop=NO_VIT, image_size=64, hidden_sizes=[16, 32, 48, 64], depths=[1, 1, 1, 1])
FOURTH_HF = {
    "cvt": dict(_drop=NO_VIT, image_size=64, embed_dim=[16, 32, 64], num_heads=[1, 2, 4], depth=[1, 1, 1],
                patch_sizes=[7, 3, 3], patch_stride=[4, 2, 2], patch_padding=[2, 1, 1], mlp_ratio=[4.0] * 3,
                attention_drop_rate=[0.0] * 3, drop_rate=[0.0] * 3, drop_path_rate=[0.0] * 3, qkv_bias=[True] * 3,
                cls_token=[False, False, True], qkv_projection_method=["dw_bn"] * 3, kernel_qkv=[3] * 3,
                padding_kv=[1] * 3, stride_kv=[2] * 3, padding_q=[1] * 3, stride_q=[1] * 3),
    "pvt": dict(PYRAMID, hidden_sizes=[16, 32, 40, 64]),  # its default heads [1, 2, 5, 8]
    "focalnet": dict(_drop=NO_VIT[:3], image_size=32, patch_size=4, embed_dim=16, depths=[1, 1],
                     focal_levels=[2, 2], focal_windows=[3, 3]),
    "poolformer": PYRAMID,
    "convnext": PYRAMID,
    "convnextv2": PYRAMID,
    "glpn": dict(STAGES, image_size=64),
    "sew": dict(AUDIO_CONV, squeeze_factor=2),
    "sew-d": dict(AUDIO_CONV, squeeze_factor=2, max_position_embeddings=64, position_buckets=16),
    "unispeech": AUDIO_CONV,
    "unispeech-sat": AUDIO_CONV,
    "wav2vec2-conformer-relpos": dict(AUDIO_CONV, _type="wav2vec2-conformer", position_embeddings_type="relative",
                                      conv_depthwise_kernel_size=3),
    "dpt": {},
    "patchtsmixer": dict(_drop=NO_VIT + ("image_size", "patch_size", "num_channels"), context_length=32,
                         patch_length=8, patch_stride=8, num_input_channels=3, d_model=16, num_layers=2),
    "dinov2-resized": dict(_type="dinov2", image_size=64, _input=32, layerscale_value=0.5),  # 8×8 table → 4×4
    "parakeet_encoder": dict(num_mel_bins=16, subsampling_conv_channels=16, conv_kernel_size=9,
                             max_position_embeddings=256),
}
OVERLAY = dict(img_size=64, embed_dim=(16, 32, 32, 64), depths=(1, 1, 1, 1), stem_width=(8, 16), transformer_dim_head=8)
METAFORMER = dict(depths=(1, 1, 1, 1), dims=(16, 32, 48, 64))
FOURTH_TIMM = {
    "timm_maxvit": ("maxvit_tiny_rw_224", OVERLAY, 64),
    "timm_coatnet": ("coatnet_0_rw_224", OVERLAY, 64),
    "timm_fastvit": ("fastvit_sa12", dict(layers=(1, 1, 1, 1), embed_dims=(32, 64, 128, 256)), 64),
    "timm_focalnet": ("timm.models.focalnet:FocalNet", dict(embed_dim=16, depths=(1, 1, 1, 1), focal_levels=(2, 2, 2, 2),
                                                           focal_windows=(3, 3, 3, 3)), 64),
    "timm_mambaout": ("mambaout_femto", METAFORMER, 64),
    "timm_vit_hybrid": ("vit_tiny_r_s16_p8_224", dict(VIT_LIKE, patch_size=1), 32),
    "timm_swinv2": ("swinv2_tiny_window8_256", dict(img_size=32, patch_size=4, embed_dim=32, depths=(2, 2),
                                                    num_heads=(2, 4), window_size=4), 32),
    "timm_pvt_v2": ("pvt_v2_b0", dict(embed_dims=(16, 32, 48, 64), depths=(1, 1, 1, 1),
                                      num_heads=(1, 2, 2, 4)), 64),
    "timm_naflexvit": ("naflexvit_base_patch16_gap", VIT_LIKE, 32),
    "timm_vit_dinov3": ("vit_small_patch16_dinov3", VIT_LIKE, 32),
    "timm_vit_dynamic": ("vit_base_patch16_224", dict(VIT_LIKE, dynamic_img_size=True), 48),  # 4×4 table → 6×6
    "timm_shvit": ("shvit_s1", dict(embed_dim=(16, 32, 48), depth=(1, 1, 1), partial_dim=(8, 8, 12)), 64),
}
# The fifth batch: convolutional networks (residual, inverted-residual, squeeze-excitation, weight-standardised,
# large-kernel attention, lambda and bottleneck self-attention hybrids) and more multimodal vision towers
# (fused q/v biases, group tokens with hard assignment, 2-D RoPE over unfolded patches).
CONV_STAGES = dict(_drop=NO_VIT, image_size=64, embedding_size=16, hidden_sizes=[16, 32, 48, 64], depths=[1, 1, 1, 1])
FIFTH_HF = {
    "resnet": dict(CONV_STAGES, layer_type="bottleneck"),
    "regnet": dict(CONV_STAGES, groups_width=8, layer_type="y"),
    "bit": dict(CONV_STAGES, layer_type="bottleneck", num_groups=4),
    "van": dict(_drop=NO_VIT, image_size=64, hidden_sizes=[16, 32, 48, 64], depths=[1, 1, 1, 1], mlp_ratios=[2, 2, 2, 2]),
    "mobilenet_v1": dict(_drop=NO_VIT, image_size=64, depth_multiplier=0.25),
    "mobilenet_v2": dict(_drop=NO_VIT, image_size=64, depth_multiplier=0.25),
    "efficientnet": dict(_drop=NO_VIT, image_size=64, width_coefficient=0.25, depth_coefficient=0.25, hidden_dim=320),
}
TOWER = dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4, image_size=32, patch_size=8)
FIFTH_CLASSES = {
    "blip_2_vision": ("blip_2", "Blip2VisionModel", "Blip2VisionConfig", TOWER),
    "owlvit_vision": ("owlvit", "OwlViTVisionModel", "OwlViTVisionConfig", TOWER),
    "kosmos2_vision": ("kosmos2", "Kosmos2VisionModel", "Kosmos2VisionConfig", TOWER),
    "altclip_vision": ("altclip", "AltCLIPVisionModel", "AltCLIPVisionConfig", TOWER),
    "idefics2_vision": ("idefics2", "Idefics2VisionTransformer", "Idefics2VisionConfig", TOWER),
    "groupvit_vision": ("groupvit", "GroupViTVisionModel", "GroupViTVisionConfig",
                        dict(TOWER, depths=[1, 1], num_group_tokens=[4, 0], num_output_groups=[4, 2])),
    "llama4_vision": ("llama4", "Llama4VisionModel", "Llama4VisionConfig",
                      dict(TOWER, vision_output_dim=64, projector_input_dim=64, projector_output_dim=64,
                           pixel_shuffle_ratio=0.5, rope_theta=10000)),
}
FIFTH_TIMM = {
    "timm_test_byobnet": ("test_byobnet", {}, 64),
    "timm_test_efficientnet": ("test_efficientnet", {}, 64),
    "timm_test_efficientnet_gn": ("test_efficientnet_gn", {}, 64),
    "timm_test_nfnet": ("test_nfnet", {}, 64),
    "timm_test_resnet": ("test_resnet", {}, 64),
    "timm_test_convnext": ("test_convnext", {}, 64),
    "timm_mobilenetv3": ("mobilenetv3_small_050", {}, 64),
    "timm_lcnet": ("lcnet_050", {}, 64),
    "timm_ghostnet": ("ghostnet_050", {}, 64),
    "timm_regnety": ("regnety_002", {}, 64),
    "timm_mobilenetv4": ("mobilenetv4_conv_small_050", {}, 64),
    "timm_dla": ("dla46x_c", {}, 64),
    "timm_vovnet": ("ese_vovnet19b_slim_dw", {}, 64),
    "timm_starnet": ("starnet_s050", {}, 64),
    "timm_botnet": ("botnet26t_256", dict(img_size=64), 64),
    "timm_lambda": ("lambda_resnet26t", {}, 64),
    "timm_mobilenetv4_hybrid": ("mobilenetv4_hybrid_medium", {}, 64),
    "timm_repvit": ("repvit_m0_9", {}, 64),
    "timm_inception_next": ("inception_next_atto", {}, 64),
}
# cases whose smallest configuration is larger than MAX_PARAMS (the timm hybrids' fixed widths)
BIG = {"timm_botnet", "timm_lambda", "timm_mobilenetv4_hybrid", "timm_repvit", "timm_inception_next"}
# The sixth batch: more of timm's convolutional and hybrid families (dense concatenation, dual paths, split and
# selective-kernel attention, mixed kernel sizes, halo attention, re-parameterisable branches) and more
# transformers vision towers (video message tokens, 2-D RoPE towers, merged-patch towers).
SIXTH_TIMM = {
    "timm_densenet": ("densenet121", dict(growth_rate=8, block_config=(2, 2, 2, 2)), 64),
    "timm_dpn": ("dpn48b", {}, 64),
    "timm_resnest": ("resnest14d", {}, 64),
    "timm_skresnet": ("skresnet18", {}, 64),
    "timm_mixnet": ("mixnet_s", {}, 64),
    "timm_tinynet": ("tinynet_e", {}, 64),
    "timm_rexnet": ("rexnet_100", {}, 64),
    "timm_ghostnetv2": ("ghostnetv2_100", {}, 64),
    "timm_mobileone": ("mobileone_s0", {}, 64),
    "timm_repghost": ("repghostnet_050", {}, 64),
    "timm_hgnetv2": ("hgnetv2_b0", {}, 64),
    "timm_efficientformerv2": ("efficientformerv2_s0", {}, 64),
    "timm_gernet": ("gernet_s", {}, 64),
    "timm_regnetz": ("regnetz_b16", {}, 64),
    "timm_haloregnetz": ("haloregnetz_b", {}, 64),
    "timm_halonext": ("eca_halonext26ts", {}, 64),
    "timm_lambda_rpt": ("lambda_resnet26rpt_256", dict(img_size=64), 64),
    "timm_test_convnext2": ("test_convnext2", {}, 64),
    "timm_test_efficientnet_ln": ("test_efficientnet_ln", {}, 64),
    "timm_fasternet": ("fasternet_t0", {}, 64),
    "timm_sequencer": ("sequencer2d_s", dict(layers=(1, 1, 1, 1), embed_dims=(32, 64, 64, 64),
                                             hidden_sizes=(16, 32, 32, 32)), 64),
}
SIXTH_CLASSES = {
    "git_vision": ("git", "GitVisionModel", "GitVisionConfig", TOWER),
    "clipseg_vision": ("clipseg", "CLIPSegVisionModel", "CLIPSegVisionConfig", TOWER),
    "x_clip_vision": ("x_clip", "XCLIPVisionModel", "XCLIPVisionConfig", dict(TOWER, mit_hidden_size=64,
                                                                           mit_intermediate_size=96)),
    "flava_image": ("flava", "FlavaImageModel", "FlavaImageConfig", TOWER),
    "metaclip_2_vision": ("metaclip_2", "MetaClip2VisionModel", "MetaClip2VisionConfig", TOWER),
    "mlcd_vision": ("mlcd", "MLCDVisionModel", "MLCDVisionConfig", TOWER),
    "janus_vision": ("janus", "JanusVisionModel", "JanusVisionConfig", TOWER),
    "smolvlm_vision": ("smolvlm", "SmolVLMVisionTransformer", "SmolVLMVisionConfig", TOWER),
    "glm4v_vision": ("glm4v", "Glm4vVisionModel", "Glm4vVisionConfig",
                     dict(QWEN_VIS, hidden_size=64, intermediate_size=96, out_hidden_size=64)),
}
SIXTH_BIG = {"timm_dpn", "timm_resnest", "timm_skresnet", "timm_ghostnetv2", "timm_regnetz", "timm_haloregnetz",
             "timm_halonext", "timm_lambda_rpt", "timm_gernet", "timm_hgnetv2", "timm_rexnet", "timm_mobileone",
             "timm_efficientformerv2"}
HF.update(THIRD_HF)
TIMM.update(THIRD_TIMM)
THIRD = list(THIRD_HF) + list(THIRD_TIMM)
HF.update(FOURTH_HF)
TIMM.update(FOURTH_TIMM)
FOURTH = list(FOURTH_HF) + list(FOURTH_TIMM)
HF.update(FIFTH_HF)
TIMM.update(FIFTH_TIMM)
CLASSES.update(FIFTH_CLASSES)
FIFTH = list(FIFTH_HF) + list(FIFTH_CLASSES) + list(FIFTH_TIMM)
TIMM.update(SIXTH_TIMM)
CLASSES.update(SIXTH_CLASSES)
BIG |= SIXTH_BIG
SIXTH = list(SIXTH_TIMM) + list(SIXTH_CLASSES)
MAX_PARAMS = 3_000_000
# --small: the committed fixtures' width (hidden 32, 2 heads), f32 only.
SMALL = dict(hidden_size=32, num_attention_heads=2, intermediate_size=48)


def hf_model(arch, small=False):
    from transformers import AutoConfig, AutoModel
    kw = dict(VIT)
    if small:
        kw.update(SMALL)
    kw.update(HF[arch])
    for k in kw.pop("_drop", ()):
        kw.pop(k, None)
    kw.pop("_img", None)
    side = kw.pop("_input", None)  # pixels of another size than the config's: its position table resized
    cfg = AutoConfig.for_model(kw.pop("_type", arch), **kw)
    if side:
        cfg.capture_input_size = side
    torch.manual_seed(0)
    try:
        model = AutoModel.from_config(cfg, attn_implementation="sdpa")
    except ValueError:  # no SDPA path: its own (eager) attention
        model = AutoModel.from_config(cfg, attn_implementation="eager")
    if getattr(cfg, "is_encoder_decoder", False) and hasattr(model, "get_encoder"):
        model = model.get_encoder()
    return model, cfg


def class_model(case, small=False):
    import importlib
    mod, model_cls, cfg_cls, kw = CLASSES[case]
    if small:  # every width the tower names, at the fixtures' sizes
        kw = dict(kw, num_heads=2, **{k: 32 for k in ("embed_dim", "hidden_size", "out_hidden_size") if k in kw})
        kw.update({k: 48 for k in ("intermediate_size",) if k in kw})
    m = importlib.import_module(f"transformers.models.{mod}.modeling_{mod}")
    c = importlib.import_module(f"transformers.models.{mod}.configuration_{mod}")
    cfg = getattr(c, cfg_cls)(**kw)
    cfg._attn_implementation = "sdpa"
    torch.manual_seed(0)
    try:
        return getattr(m, model_cls)(cfg), cfg
    except ValueError:  # no SDPA path: its own (eager) attention
        cfg._attn_implementation = "eager"
        torch.manual_seed(0)
        return getattr(m, model_cls)(cfg), cfg


def hf_request(model, cfg, gen):
    """The model's main input at the config's sizes, plus the keyword arguments it needs."""
    name = getattr(model, "main_input_name", "pixel_values")
    if "pixel_values" in inspect.signature(model.forward).parameters:  # a tower whose main input is named otherwise
        name = "pixel_values"
    kind = getattr(cfg, "model_type", "")
    if hasattr(cfg, "spatial_merge_size"):  # Qwen-VL towers: flattened patches of an 8×8 grid, one frame
        t, p = cfg.temporal_patch_size, cfg.patch_size
        return "hidden_states", torch.randn(64, cfg.in_channels * t * p * p, generator=gen), {
            "grid_thw": torch.tensor([[1, 8, 8]])}
    if kind == "siglip2_vision_model":  # NaFlex: patches [B, N, C·p·p], their grid and mask
        p = cfg.patch_size
        return name, torch.randn(1, 16, cfg.num_channels * p * p, generator=gen), {
            "spatial_shapes": torch.tensor([[4, 4]]), "pixel_attention_mask": torch.ones(1, 16, dtype=torch.long)}
    if kind in ("patchtst", "patchtsmixer"):  # a time series: [B, context, channels]
        return name, torch.randn(1, cfg.context_length, cfg.num_input_channels, generator=gen), {}
    if kind == "vjepa2":
        return name, torch.randn(1, cfg.frames_per_clip, 3, cfg.crop_size, cfg.crop_size, generator=gen), {}
    if kind == "speech_to_text":  # [B, frames, features]
        return name, torch.randn(1, 32, cfg.input_feat_per_channel * cfg.input_channels, generator=gen), {}
    if kind == "wav2vec2-bert":
        return name, torch.randn(1, 16, cfg.feature_projection_input_dim, generator=gen), {}
    if kind == "moonshine":  # raw audio: the conv stem strides 384 samples
        return name, torch.randn(1, 4000, generator=gen), {}
    if kind == "parakeet_encoder":  # [B, frames, mels]
        return name, torch.randn(1, 64, cfg.num_mel_bins, generator=gen), {}
    if name == "input_features":  # whisper: [B, mels, 2 · positions]
        return name, torch.randn(1, cfg.num_mel_bins, 2 * cfg.max_source_positions, generator=gen), {}
    if name == "input_values" and hasattr(cfg, "conv_dim"):  # raw waveform
        return name, torch.randn(1, 400, generator=gen), {}
    if name == "input_values":  # ast: [B, frames, mels]
        return name, torch.randn(1, cfg.max_length, cfg.num_mel_bins, generator=gen), {}
    frames = getattr(cfg, "num_frames", None)
    size = getattr(cfg, "capture_input_size", None) or getattr(cfg, "image_size", None) or HF.get(kind, {}).get("_img", 32)
    size = size if isinstance(size, int) else size[0]
    if frames:
        return name, torch.randn(1, frames, cfg.num_channels, size, size, generator=gen), {}
    extra = {"image_sizes": torch.tensor([[size, size]])} if cfg.model_type == "pixtral" else {}
    return name, torch.randn(1, getattr(cfg, "num_channels", 3), size, size, generator=gen), extra


def _resolve(path):
    import importlib
    mod, cls = path.split(":")
    return getattr(importlib.import_module(mod), cls)


def _settings(v):
    """A setting with "@module:Name" strings (a layer class the constructor takes) resolved."""
    if isinstance(v, str) and v.startswith("@"):
        return _resolve(v[1:])
    if isinstance(v, tuple):
        return tuple(_settings(x) for x in v)
    return v


def timm_model(case, small=False):
    """The timm model and the side of its square input."""
    import timm
    name, kw, side = (TIMM[case] + (32,))[:3]
    sizes = dict(TIMM_SIZES, embed_dim=32, num_heads=2) if small else TIMM_SIZES
    kw = dict(kw)
    if len(TIMM[case]) == 3 and not kw.pop("_vit", False):  # the third batch: its own constructor settings
        sizes = dict(num_classes=0)
    kw = {k: _settings(v) for k, v in kw.items()}
    if "_cfg" in kw:
        cfg_cls, cfg_kw = kw.pop("_cfg")
        kw["cfg"] = _resolve(cfg_cls)(**cfg_kw)
    torch.manual_seed(0)
    kw = dict(sizes, **kw)
    if ":" in name:
        return _resolve(name)(**kw), side
    return timm.create_model(name, pretrained=False, **kw), side


def capture(case, outdir, small=False):
    done = []
    runs = [("f32", torch.float32, "cpu"), ("bf16", torch.bfloat16, "cuda" if torch.cuda.is_available() else "cpu")]
    for tag, dtype, device in runs[:1] if small else runs:
        # transformers: built under the run's default dtype, as from_pretrained(dtype=...) builds (the
        # buffers a module makes in __init__, a relative-coordinates table, a sinusoid, in that dtype);
        # timm: built in f32 and moved with .to(dtype) (every floating buffer cast, below)
        torch.set_default_dtype(torch.float32 if case in TIMM else dtype)
        try:
            if case in TIMM:
                (model, side), name, extra = timm_model(case, small), "pixel_values", {}
                prod = {"library": "timm", "model": TIMM[case][0]}
            else:
                model, cfg = class_model(case, small) if case in CLASSES else hf_model(case, small)
        finally:
            torch.set_default_dtype(torch.float32)
        for p in model.parameters():  # drawn in f32 and placed as before; only the buffers keep the dtype
            p.data = p.data.float()
        if case in TIMM:
            x = torch.randn(1, 3, side, side, generator=torch.Generator().manual_seed(2))
        else:
            name, x, extra = hf_request(model, cfg, torch.Generator().manual_seed(2))
            prod = {"library": "transformers", "model_type": cfg.model_type or case}
        n = sum(p.numel() for p in model.parameters())
        if n > (4 * MAX_PARAMS if case in BIG else MAX_PARAMS):
            raise ValueError(f"{n} parameters: its config ignores the small sizes")
        randomize(model, torch.Generator().manual_seed(1))
        model = place(model.eval(), dtype, device)
        if case in TIMM:
            model = model.to(dtype)
        x = x.to(device=device, dtype=dtype)
        extra = {k: v.to(device=device, dtype=dtype) if v.is_floating_point() else v.to(device)
                 for k, v in extra.items()}
        path = os.path.join(outdir, f"{case}-{tag}.npz")
        with zflow_capture.Capture(model, name="encoder", path=path, producer=dict(prod, case=case)) as cap:
            cap.input(name, x)
            with torch.no_grad():
                out = model(x, **extra) if case in TIMM else model(**{name: x}, **extra)
            h = out if torch.is_tensor(out) else (out.last_hidden_state if hasattr(out, "last_hidden_state") else out[0])
            cap.output("hidden", h)
        done.append(f"{tag} {cap.summary['calls']} calls")
    return ", ".join(done)


def _timeout(signum, frame):
    raise TimeoutError("over CAPTURE_TIMEOUT")


def main():
    args = sys.argv[1:]
    small = "--small" in args
    args = [a for a in args if a != "--small"]
    batches = {"more": MORE, "third": THIRD, "fourth": FOURTH, "fifth": FIFTH, "sixth": SIXTH}
    first = [c for c in list(HF) + list(TIMM) if c not in MORE + THIRD + FOURTH + FIFTH + SIXTH]
    if args[:1] == ["--list"]:
        print("\n".join(batches.get("".join(args[1:]), first)))
        return
    outdir = args[0]
    if len(args) == 2 and args[1] in batches:
        args = [outdir] + batches[args[1]]
    os.makedirs(outdir, exist_ok=True)
    import transformers
    print("torch", torch.__version__, "transformers", transformers.__version__, flush=True)
    signal.signal(signal.SIGALRM, _timeout)
    limit = int(os.environ.get("CAPTURE_TIMEOUT", "60"))
    for case in args[1:] or first:
        try:
            signal.alarm(limit)
            print(f"{case:24s} ok   {capture(case, outdir, small)}", flush=True)
        except Exception as e:
            msg = "".join(traceback.format_exception_only(type(e), e)).strip().splitlines()[-1]
            print(f"{case:24s} FAIL {msg[:200]}", flush=True)
            if os.environ.get("CAPTURE_TRACEBACK"):  # where it failed: the last frames
                print("".join(traceback.format_tb(e.__traceback__)[-3:]), flush=True)
        finally:
            signal.alarm(0)


if __name__ == "__main__":
    main()
