"""Correctness sweep over architectures beyond the zoo: torchvision and transformers classes (and
torch.nn's recurrent layers) built with random weights (small configs for the transformers),
exported as users export them (``torch.onnx.export(..., dynamo=True)`` with a dynamic batch, and
sequence, frames or samples; an axis the export fixes anyway is reported as the exporter's), compiled
once by Ember with the first run's shape as its hint (so its kernels' static twins run that shape,
and their symbolic loops the other), and run at two shapes against PyTorch eager (rtol 1e-3, atol
1e-4 of the output's scale). Each model runs in its own process under a time limit, so one that
crashes or hangs is reported and the sweep goes on. The zoo extra (torchvision, transformers).

    python bench/arch_sweep.py                       # every architecture, through ONNX
    python bench/arch_sweep.py --via torch           # through ember.from_torch instead
    python bench/arch_sweep.py efficientnet_b3 hf_wav2vec2
    python bench/arch_sweep.py --list
    python bench/arch_sweep.py --dynamic-hw fcn_resnet50 swin_v2_t   # image models, dynamic H and W too

A line per model: OK (both shapes match), DIFF (a mismatch), ERROR (Ember's error, or the
exporter's: torch.export fails on some classes, which is not Ember's), EXPORT (the file itself
computes another answer at a shape, or refuses it, as ONNX Runtime shows), TIMEOUT. Exits 1 if any
model is DIFF, TIMEOUT, or fails in Ember.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

# name: (kind, constructor source evaluated with tv(fn, **kw) and hf(config, class, **kw))
_SMALL_LM = "hidden_size=256, intermediate_size=688, num_hidden_layers=2, num_attention_heads=4, vocab_size=1000"
_SMALL_VIT = "hidden_size=192, num_hidden_layers=3, num_attention_heads=3, intermediate_size=768"
_SMALL_AUDIO = "hidden_size=192, num_hidden_layers=2, num_attention_heads=3, intermediate_size=768"
ARCHS = {
    # torchvision
    "efficientnet_b1": ("vision", 'tv("efficientnet_b1")'),
    "efficientnet_b3": ("vision", 'tv("efficientnet_b3")'),
    "mnasnet0_5": ("vision", 'tv("mnasnet0_5")'),
    "shufflenet_v2_x0_5": ("vision", 'tv("shufflenet_v2_x0_5")'),
    "regnet_y_800mf": ("vision", 'tv("regnet_y_800mf")'),
    "regnet_x_3_2gf": ("vision", 'tv("regnet_x_3_2gf")'),
    "mobilenet_v3_large_075": ("vision", 'tv("mobilenet_v3_large", width_mult=0.75)'),
    "wide_resnet50_2": ("vision", 'tv("wide_resnet50_2")'),
    "googlenet": ("vision", 'tv("googlenet", aux_logits=False, init_weights=True)'),
    "inception_v3": ("vision299", 'tv("inception_v3", aux_logits=False, init_weights=True)'),
    "lraspp_mobilenet_v3": ("vision", 'tvseg("lraspp_mobilenet_v3_large")'),
    "fcn_resnet50": ("vision", 'tvseg("fcn_resnet50", aux_loss=False)'),
    "maxvit_t": ("vision", 'tv("maxvit_t")'),
    "swin_v2_t": ("vision", 'tv("swin_v2_t")'),
    "densenet121": ("vision", 'tv("densenet121")'),
    "squeezenet1_1": ("vision", 'tv("squeezenet1_1")'),
    "resnext50_32x4d": ("vision", 'tv("resnext50_32x4d")'),
    "efficientnet_v2_s": ("vision", 'tv("efficientnet_v2_s")'),
    "vit_b_32": ("vision", 'tv("vit_b_32")'),
    "r3d_18": ("video", 'tvvideo("r3d_18")'),
    "r2plus1d_18": ("video", 'tvvideo("r2plus1d_18")'),
    # torch.nn recurrent layers
    "lstm": ("feat64", 'rnn("LSTM", 64, 128, num_layers=2, batch_first=True)'),
    "gru_bidirectional": ("feat64", 'rnn("GRU", 64, 96, bidirectional=True, batch_first=True)'),
    # transformers, vision
    "hf_convnextv2": ("vision", 'hf("ConvNextV2Config", "ConvNextV2Model", depths=[1, 1, 2, 1])'),
    "hf_efficientnet": ("vision", 'hf("EfficientNetConfig", "EfficientNetModel")'),
    "hf_levit": ("vision", 'hf("LevitConfig", "LevitModel")'),
    "hf_poolformer": ("vision", 'hf("PoolFormerConfig", "PoolFormerModel")'),
    "hf_focalnet": ("vision", 'hf("FocalNetConfig", "FocalNetModel", depths=[1, 1, 2, 1])'),
    "hf_pvt_v2": ("vision", 'hf("PvtV2Config", "PvtV2Model")'),
    "hf_swinv2": ("vision", 'hf("Swinv2Config", "Swinv2Model", depths=[1, 1, 2, 1])'),
    "hf_hiera": ("vision", 'hf("HieraConfig", "HieraModel")'),
    "hf_swiftformer": ("vision", 'hf("SwiftFormerConfig", "SwiftFormerModel")'),
    "hf_glpn": ("vision", 'hf("GLPNConfig", "GLPNModel")'),
    "hf_bit": ("vision", 'hf("BitConfig", "BitModel", depths=[1, 1, 1, 1])'),
    "hf_mobilevit": ("vision256", 'hf("MobileViTConfig", "MobileViTModel")'),
    "hf_segformer": ("vision", 'hf("SegformerConfig", "SegformerModel")'),
    "hf_yolos": ("vision", f'hf("YolosConfig", "YolosModel", image_size=[224, 224], {_SMALL_VIT})'),
    "hf_dpt": ("vision", f'hf("DPTConfig", "DPTModel", image_size=224, backbone_out_indices=[0, 1, 2, 3], '
                         f'hidden_size=192, num_hidden_layers=4, num_attention_heads=3, intermediate_size=768)'),
    "hf_vitdet": ("vision", f'hf("VitDetConfig", "VitDetModel", image_size=224, pretrain_image_size=224, '
                            f'hidden_size=192, num_hidden_layers=3, num_attention_heads=3)'),
    "hf_siglip_vision": ("vision", f'hf("SiglipVisionConfig", "SiglipVisionModel", {_SMALL_VIT})'),
    "hf_data2vec_vision": ("vision", f'hf("Data2VecVisionConfig", "Data2VecVisionModel", {_SMALL_VIT})'),
    "hf_deit": ("vision", f'hf("DeiTConfig", "DeiTModel", {_SMALL_VIT})'),
    "hf_beit": ("vision", f'hf("BeitConfig", "BeitModel", use_relative_position_bias=True, {_SMALL_VIT})'),
    "hf_dinov2": ("vision", f'hf("Dinov2Config", "Dinov2Model", {_SMALL_VIT})'),
    "hf_clip_vision": ("vision", f'hf("CLIPVisionConfig", "CLIPVisionModel", {_SMALL_VIT})'),
    "hf_detr": ("vision", 'hf("DetrConfig", "DetrModel", use_timm_backbone=False, use_pretrained_backbone=False, '
                          'backbone_config=cfg("ResNetConfig", depths=[1, 1, 1, 1], out_features=["stage4"]), '
                          'd_model=128, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, '
                          'decoder_attention_heads=4, encoder_ffn_dim=256, decoder_ffn_dim=256, num_queries=20)'),
    "hf_upernet": ("vision", 'hf("UperNetConfig", "UperNetForSemanticSegmentation", hidden_size=128, '
                             'auxiliary_in_channels=384, backbone_config=cfg("ConvNextConfig", depths=[1, 1, 1, 1], '
                             'hidden_sizes=[96, 192, 384, 768], '
                             'out_features=["stage1", "stage2", "stage3", "stage4"]))'),
    "hf_depth_anything": ("vision", 'hf("DepthAnythingConfig", "DepthAnythingForDepthEstimation", '
                                    'depth_estimation_type="metric", reassemble_hidden_size=192, '
                                    'fusion_hidden_size=64, neck_hidden_sizes=[24, 48, 96, 192], '
                                    'backbone_config=cfg("Dinov2Config", hidden_size=192, num_hidden_layers=4, '
                                    'num_attention_heads=3, out_indices=[1, 2, 3, 4], reshape_hidden_states=False, '
                                    'apply_layernorm=True))'),
    "hf_mobilevitv2": ("vision256", 'hf("MobileViTV2Config", "MobileViTV2Model")'),
    "hf_sam_vision": ("vision", 'hf("SamVisionConfig", "SamVisionModel", hidden_size=192, num_hidden_layers=2, '
                               'num_attention_heads=3, image_size=224, output_channels=64, window_size=7, '
                               'global_attn_indexes=[1], mlp_dim=768)'),
    "hf_deformable_detr": ("vision", 'hf("DeformableDetrConfig", "DeformableDetrModel", use_timm_backbone=False, '
                                     'use_pretrained_backbone=False, backbone_config=cfg("ResNetConfig", '
                                     'depths=[1, 1, 1, 1], out_features=["stage2", "stage3", "stage4"]), '
                                     'd_model=128, encoder_layers=1, decoder_layers=1, encoder_attention_heads=4, '
                                     'decoder_attention_heads=4, encoder_ffn_dim=256, decoder_ffn_dim=256, '
                                     'num_queries=20)'),
    # transformers, text
    "hf_llama": ("text", f'hf("LlamaConfig", "LlamaForCausalLM", num_key_value_heads=2, {_SMALL_LM})'),
    "hf_phi3": ("text", f'hf("Phi3Config", "Phi3ForCausalLM", num_key_value_heads=2, pad_token_id=0, {_SMALL_LM})'),
    "hf_gemma2": ("text", f'hf("Gemma2Config", "Gemma2ForCausalLM", num_key_value_heads=2, head_dim=64, '
                          f'sliding_window=16, {_SMALL_LM})'),
    "hf_starcoder2": ("text", f'hf("Starcoder2Config", "Starcoder2ForCausalLM", num_key_value_heads=2, {_SMALL_LM})'),
    "hf_granite": ("text", f'hf("GraniteConfig", "GraniteForCausalLM", num_key_value_heads=2, {_SMALL_LM})'),
    "hf_stablelm": ("text", f'hf("StableLmConfig", "StableLmForCausalLM", num_key_value_heads=2, {_SMALL_LM})'),
    "hf_olmo": ("text", f'hf("OlmoConfig", "OlmoForCausalLM", {_SMALL_LM})'),
    "hf_gptj": ("text", 'hf("GPTJConfig", "GPTJForCausalLM", n_embd=256, n_layer=2, n_head=4, rotary_dim=32, '
                        'vocab_size=1000)'),
    "hf_codegen": ("text", 'hf("CodeGenConfig", "CodeGenForCausalLM", n_embd=256, n_layer=2, n_head=4, '
                           'rotary_dim=32, vocab_size=1000)'),
    "hf_gpt_bigcode": ("text", 'hf("GPTBigCodeConfig", "GPTBigCodeForCausalLM", n_embd=256, n_layer=2, n_head=4, '
                               'vocab_size=1000)'),
    "hf_bart": ("text", 'hf("BartConfig", "BartModel", d_model=256, encoder_layers=2, decoder_layers=2, '
                        'encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=688, '
                        'decoder_ffn_dim=688, vocab_size=1000)'),
    "hf_mobilebert": ("text", 'hf("MobileBertConfig", "MobileBertModel", num_hidden_layers=2, vocab_size=1000)'),
    "hf_deberta_v2": ("text", f'hf("DebertaV2Config", "DebertaV2Model", {_SMALL_LM})'),
    "hf_xlm_roberta": ("text", f'hf("XLMRobertaConfig", "XLMRobertaModel", {_SMALL_LM})'),
    "hf_mpnet": ("text", f'hf("MPNetConfig", "MPNetModel", {_SMALL_LM})'),
    "hf_squeezebert": ("text", f'hf("SqueezeBertConfig", "SqueezeBertModel", embedding_size=256, {_SMALL_LM})'),
    "hf_xlnet": ("text", 'hf("XLNetConfig", "XLNetModel", d_model=256, n_layer=2, n_head=4, d_inner=688, '
                         'vocab_size=1000)'),
    "hf_qwen2": ("text", f'hf("Qwen2Config", "Qwen2ForCausalLM", num_key_value_heads=2, {_SMALL_LM})'),
    "hf_qwen3": ("text", f'hf("Qwen3Config", "Qwen3ForCausalLM", num_key_value_heads=2, head_dim=64, {_SMALL_LM})'),
    "hf_mistral": ("text", f'hf("MistralConfig", "MistralForCausalLM", num_key_value_heads=2, sliding_window=16, '
                           f'{_SMALL_LM})'),
    "hf_mixtral": ("text", f'hf("MixtralConfig", "MixtralForCausalLM", num_key_value_heads=2, num_local_experts=4, '
                           f'num_experts_per_tok=2, {_SMALL_LM})'),
    "hf_phi": ("text", f'hf("PhiConfig", "PhiForCausalLM", partial_rotary_factor=0.5, {_SMALL_LM})'),
    "hf_cohere": ("text", f'hf("CohereConfig", "CohereForCausalLM", num_key_value_heads=2, {_SMALL_LM})'),
    "hf_gpt_neox": ("text", f'hf("GPTNeoXConfig", "GPTNeoXForCausalLM", rotary_pct=0.25, {_SMALL_LM})'),
    "hf_opt": ("text", 'hf("OPTConfig", "OPTForCausalLM", hidden_size=256, ffn_dim=688, num_hidden_layers=2, '
                       'num_attention_heads=4, vocab_size=1000, word_embed_proj_dim=256)'),
    "hf_bloom": ("text", 'hf("BloomConfig", "BloomForCausalLM", hidden_size=256, n_layer=2, n_head=4, '
                         'vocab_size=1000)'),
    "hf_falcon": ("text", 'hf("FalconConfig", "FalconForCausalLM", hidden_size=256, num_hidden_layers=2, '
                          'num_attention_heads=4, vocab_size=1000)'),
    "hf_mamba": ("text", 'hf("MambaConfig", "MambaForCausalLM", hidden_size=128, state_size=8, num_hidden_layers=2, '
                         'vocab_size=1000)'),
    "hf_t5_encoder": ("text", 'hf("T5Config", "T5EncoderModel", d_model=256, d_ff=688, num_layers=2, num_heads=4, '
                              'd_kv=64, vocab_size=1000)'),
    "hf_electra": ("text", f'hf("ElectraConfig", "ElectraModel", embedding_size=128, {_SMALL_LM})'),
    "hf_albert": ("text", f'hf("AlbertConfig", "AlbertModel", embedding_size=128, {_SMALL_LM})'),
    "hf_convbert": ("text", f'hf("ConvBertConfig", "ConvBertModel", embedding_size=256, {_SMALL_LM})'),
    "hf_clip_text": ("text", f'hf("CLIPTextConfig", "CLIPTextModel", {_SMALL_LM})'),
    "hf_gpt_neo": ("text", 'hf("GPTNeoConfig", "GPTNeoForCausalLM", hidden_size=256, num_layers=2, num_heads=4, '
                           'attention_types=[[["global", "local"], 1]], window_size=16, vocab_size=1000)'),
    "hf_xglm": ("text", 'hf("XGLMConfig", "XGLMForCausalLM", d_model=256, num_layers=2, attention_heads=4, '
                        'ffn_dim=688, vocab_size=1000)'),
    "hf_roformer": ("text", f'hf("RoFormerConfig", "RoFormerModel", embedding_size=256, {_SMALL_LM})'),
    "hf_layoutlm": ("text", f'hf("LayoutLMConfig", "LayoutLMModel", {_SMALL_LM})'),
    "hf_fnet": ("text", 'hf("FNetConfig", "FNetModel", hidden_size=256, num_hidden_layers=2, intermediate_size=688, '
                        'vocab_size=1000)'),
    "hf_canine": ("text", 'hf("CanineConfig", "CanineModel", hidden_size=256, num_hidden_layers=2, '
                          'num_attention_heads=4, intermediate_size=688)'),
    "hf_longformer": ("text", f'hf("LongformerConfig", "LongformerModel", attention_window=8, {_SMALL_LM})'),
    "hf_esm": ("protein", 'hf("EsmConfig", "EsmModel", hidden_size=256, num_hidden_layers=2, num_attention_heads=4, '
                          'intermediate_size=688, vocab_size=33, pad_token_id=1, position_embedding_type="rotary")'),
    # transformers, speech
    "hf_wav2vec2": ("audio", f'hf("Wav2Vec2Config", "Wav2Vec2Model", {_SMALL_AUDIO})'),
    "hf_hubert": ("audio", f'hf("HubertConfig", "HubertModel", {_SMALL_AUDIO})'),
    "hf_wav2vec2_conformer": ("audio", f'hf("Wav2Vec2ConformerConfig", "Wav2Vec2ConformerModel", {_SMALL_AUDIO}, '
                                       f'position_embeddings_type="rotary")'),
    "hf_sew": ("audio", f'hf("SEWConfig", "SEWModel", {_SMALL_AUDIO})'),
    "hf_data2vec_audio": ("audio", f'hf("Data2VecAudioConfig", "Data2VecAudioModel", {_SMALL_AUDIO})'),
    "hf_speech2text_encoder": ("feat80", 'hf("Speech2TextConfig", "Speech2TextModel", d_model=192, encoder_layers=2, '
                                         'decoder_layers=2, encoder_attention_heads=3, decoder_attention_heads=3, '
                                         'encoder_ffn_dim=768, decoder_ffn_dim=768, vocab_size=1000).encoder'),
    "hf_ast": ("ast", 'hf("ASTConfig", "ASTModel", max_length=256, hidden_size=192, num_hidden_layers=3, '
                      'num_attention_heads=3, intermediate_size=768)'),
    "hf_wavlm": ("audio", f'hf("WavLMConfig", "WavLMModel", {_SMALL_AUDIO})'),
    "hf_wav2vec2_bert": ("feat160", f'hf("Wav2Vec2BertConfig", "Wav2Vec2BertModel", {_SMALL_AUDIO}, '
                                    f'feature_projection_input_dim=160)'),
    "hf_encodec_encoder": ("wave", 'hf("EncodecConfig", "EncodecModel").encoder'),
    # transformers, time series
    "hf_patchtsmixer": ("ts", 'hf("PatchTSMixerConfig", "PatchTSMixerModel", context_length=128, patch_length=16, '
                              'patch_stride=8, num_input_channels=7, d_model=32, num_layers=2)'),
    "hf_patchtst": ("ts", 'hf("PatchTSTConfig", "PatchTSTModel", num_input_channels=7, context_length=128, '
                          'patch_length=16, patch_stride=8, d_model=64, num_attention_heads=4, '
                          'num_hidden_layers=2, ffn_dim=128)'),
    "hf_whisper_encoder": ("mel", 'hf("WhisperConfig", "WhisperModel", d_model=192, encoder_layers=2, '
                                  'decoder_layers=2, encoder_attention_heads=3, decoder_attention_heads=3, '
                                  'encoder_ffn_dim=768, decoder_ffn_dim=768, vocab_size=1000, pad_token_id=0, '
                                  'bos_token_id=1, eos_token_id=2, decoder_start_token_id=1).encoder'),
}
SHAPES = [(1, 32), (2, 48)]  # (batch, sequence) -- a vision model uses the batch only


def _hw_shapes(kind: str) -> list:
    """``--dynamic-hw``: (batch, (height, width)) runs of an image model -- square at the export's
    size, then wide and odd-sized (a stride-2 stage rounds up, a window pads)."""
    s = int(kind[6:] or 224)
    return [(1, (s, s)), (2, (s * 3 // 4, s * 5 // 4)), (1, (s * 3 // 4 + 1, s * 3 // 4 - 3))]


def _inputs(kind: str, batch: int, seq, seed: int):
    """The example inputs; for an image model ``seq`` may be its (height, width)."""
    import torch

    g = torch.Generator().manual_seed(seed)
    if kind.startswith("vision"):
        size = int(kind[6:] or 224)
        h, w = seq if isinstance(seq, tuple) else (size, size)
        return (torch.randn(batch, 3, h, w, generator=g),)
    if kind == "audio":  # raw samples: 400 per position
        return (torch.randn(batch, seq * 400, generator=g),)
    if kind == "wave":  # one channel of raw samples: 320 per position
        return (torch.randn(batch, 1, seq * 320, generator=g),)
    if kind == "mel":  # Whisper's 30 s of 80 mel bins
        return (torch.randn(batch, 80, 3000, generator=g),)
    if kind == "video":  # 8 frames of 112 x 112
        return (torch.randn(batch, 3, 8, 112, 112, generator=g),)
    if kind.startswith("feat"):  # (batch, frames, features): 4 frames per position
        return (torch.randn(batch, seq * 4, int(kind[4:]), generator=g),)
    if kind == "ast":  # a spectrogram of 256 frames of 128 mel bins
        return (torch.randn(batch, 256, 128, generator=g),)
    if kind == "ts":  # 128 steps of 7 series
        return (torch.randn(batch, 128, 7, generator=g),)
    return (torch.randint(0, 33 if kind == "protein" else 1000, (batch, seq), generator=g),)


def _dynamic(kind: str, hw: bool = False):
    import torch

    batch = torch.export.Dim("batch", min=1, max=64)
    if kind.startswith("vision") and hw:  # (AUTO: where the model fixes them, the export says so)
        return ({0: batch, 2: torch.export.Dim.AUTO, 3: torch.export.Dim.AUTO},)
    if kind.startswith("vision") or kind in ("mel", "video", "ast", "ts"):
        return ({0: batch},)
    if kind == "audio":
        return ({0: batch, 1: torch.export.Dim("samples", min=2000, max=64000)},)
    if kind.startswith("feat"):
        return ({0: batch, 1: torch.export.Dim("frames", min=8, max=1024)},)
    if kind == "wave":
        return ({0: batch, 2: torch.export.Dim("samples", min=3200, max=64000)},)
    return ({0: batch, 1: torch.export.Dim("seq", min=2, max=256)},)


def _build(source: str):
    import torch

    from ember.bench.zoo import torchvision

    def tv(fn, **kw):
        return getattr(torchvision().models, fn)(weights=None, **kw)

    def tvseg(fn, **kw):
        return getattr(torchvision().models.segmentation, fn)(weights=None, weights_backbone=None, **kw)

    def tvvideo(fn, **kw):
        return getattr(torchvision().models.video, fn)(weights=None, **kw)

    def cfg(config, **kw):
        import transformers

        return getattr(transformers, config)(**kw)

    def hf(config, cls, **kw):
        import transformers

        return getattr(transformers, cls)(cfg(config, **kw))

    class RNN(torch.nn.Module):
        """A recurrent layer and a linear head on its outputs."""

        def __init__(self, cls, inputs, hidden, **kw):
            super().__init__()
            self.rnn = getattr(torch.nn, cls)(inputs, hidden, **kw)
            self.head = torch.nn.Linear(hidden * (2 if kw.get("bidirectional") else 1), 10)

        def forward(self, x):
            return self.head(self.rnn(x)[0])

    class Main(torch.nn.Module):
        """The model's main output as one tensor."""

        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, x):
            o = self.m(x)
            if isinstance(o, dict) and "out" in o:
                return o["out"]
            for key in ("logits", "last_hidden_state", "predicted_depth"):
                if hasattr(o, key):
                    return getattr(o, key)
            return o[0] if isinstance(o, (tuple, list)) else o

    torch.manual_seed(0)
    model = Main(eval(source, {"tv": tv, "tvseg": tvseg, "tvvideo": tvvideo, "hf": hf, "cfg": cfg, "rnn": RNN})).eval()
    with torch.no_grad():
        for p in model.parameters():  # random, never a splat (or vanishing) constant
            if p.numel() > 1 and float(p.std()) < 1e-6:  # (SAM inits its neck at ~1e-10)
                p.normal_(0, 0.02)
    return model


def _onnxruntime_run(path: str, args):
    """ONNX Runtime's first output for ``args`` on the exported file, the exception it raised,
    or None where it is not installed."""
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    try:
        return sess.run(None, {i.name: a.numpy() for i, a in zip(sess.get_inputs(), args)})[0]
    except Exception as e:  # (onnxruntime's own error types)
        return e


def _onnxruntime_agrees(path: str, args, got, scale: float) -> bool:
    """Whether ONNX Runtime (if installed) runs the exported file to Ember's answer ``got``."""
    import numpy as np

    theirs = _onnxruntime_run(path, args)
    return (isinstance(theirs, np.ndarray) and theirs.shape == got.shape
            and np.allclose(got, theirs, rtol=1e-4, atol=1e-5 * max(1.0, scale)))


def _onnxruntime_refuses(path: str, args) -> bool:
    """Whether ONNX Runtime (if installed) fails to run the exported file on ``args`` too."""
    return isinstance(_onnxruntime_run(path, args), Exception)


def check_one(name: str, via: str, out_dir: str, hw: bool = False) -> None:
    """Run in a child process: export, compile, compare; print one RESULT line."""
    import numpy as np
    import torch

    import ember

    kind, source = ARCHS[name]
    model = _build(source)
    example = _inputs(kind, 2, 32, 0)
    t0 = time.perf_counter()
    try:
        with torch.no_grad():
            if via == "onnx":
                path = os.path.join(out_dir, f"{name}.onnx")
                torch.onnx.export(model, example, path, dynamo=True, dynamic_shapes=_dynamic(kind, hw),
                                  input_names=["x"], output_names=["y"])
    except Exception as e:  # the exporter's failure, not Ember's
        print(f"RESULT {name} EXPORT {type(e).__name__}: {str(e).splitlines()[0][:200]}", flush=True)
        return
    shapes, note = (_hw_shapes(kind) if hw else SHAPES), ""
    if via == "onnx":  # the exporter may have fixed a dimension asked dynamic (a Python loop over it)
        import onnx

        dims = [d.dim_value or None for d in onnx.load(path, load_external_data=False).graph.input[0]
                .type.tensor_type.shape.dim]
        fixed = {a: dims[a] for a in _dynamic(kind, hw)[0] if dims[a] is not None}
        if set(fixed) - {0}:
            print(f"RESULT {name} EXPORT specialized: axes {sorted(fixed)} of the input exported as "
                  f"{[fixed[a] for a in sorted(fixed)]}", flush=True)
            return
        if fixed:  # (a fixed batch: run both sequence lengths at it)
            shapes, note = [(fixed[0], seq) for _, seq in shapes], f" (the export fixed the batch at {fixed[0]})"
    try:
        if via == "onnx":
            # the likely shape is the first run's: its kernels' static twins serve that run, the
            # symbolic kernels the others (ember.compiler.twin) -- both checked
            import onnx

            g = onnx.load(path, load_external_data=False).graph
            inits = {i.name for i in g.initializer}
            names = [i.name for i in g.input if i.name not in inits]
            first = _inputs(kind, shapes[0][0], shapes[0][1], 0)
            exe = ember.compile(path, shape_hints={n: tuple(a.shape) for n, a in zip(names, first)}, wait=True)

            def run(args):
                return exe.run(*[a.numpy() for a in args])[0]
        else:
            compiled = ember.from_torch(model, example, dynamic_shapes=_dynamic(kind, hw))

            def run(args):
                return compiled(*args).detach().numpy()
        took = time.perf_counter() - t0
        worst, ok, exported_differs, refused = 0.0, True, [], []
        for batch, seq in shapes:
            args = _inputs(kind, batch, seq, batch * 7 + (sum(seq) if isinstance(seq, tuple) else seq))
            with torch.no_grad():
                ref = model(*args).numpy()
            try:
                got = np.asarray(run(args))
            except ember.ShapeError:
                if via == "onnx" and _onnxruntime_refuses(path, args):
                    # the export fixed a size at this shape (MobileViT's patch grid, as 16x16), which
                    # Ember's shape checks name: the exporter's, not Ember's
                    refused.append(f"{batch}x{seq}")
                    continue
                raise
            scale = float(np.abs(ref).max())
            if not scale or float(ref.std()) == 0:  # (a constant output checks nothing: fix the config)
                print(f"RESULT {name} DIFF the reference output is constant ({scale})", flush=True)
                return

            def close(a):
                return a.shape == ref.shape and np.allclose(a, ref, rtol=1e-3, atol=1e-4 * max(1.0, scale))
            if not close(got) and via == "onnx" and _onnxruntime_agrees(path, args, got, scale):
                # the exported model itself computes another answer at this size (Swin-V2 at a
                # window-sized plane): the exporter's, not Ember's
                exported_differs.append(f"{batch}x{seq}")
                continue
            ok &= close(got)
            if got.shape == ref.shape:
                worst = max(worst, float(np.abs(got - ref).max()))
        if ok and exported_differs:
            print(f"RESULT {name} EXPORT differs from eager at {', '.join(exported_differs)}; Ember matches "
                  f"ONNX Runtime there (elsewhere max abs diff {worst:.1e}){note}", flush=True)
            return
        if ok and refused:
            print(f"RESULT {name} EXPORT fixed a size: at {', '.join(refused)} Ember's shape checks and "
                  f"ONNX Runtime both refuse the file (elsewhere max abs diff {worst:.1e}){note}", flush=True)
            return
        print(f"RESULT {name} {'OK' if ok else 'DIFF'} compile {took:.0f} s, max abs diff {worst:.1e}{note}",
              flush=True)
    except ember.EmberError as e:
        # (from_torch names torch.export's own failures: the exporter's, as through ONNX)
        kind_of = "EXPORT" if str(e).startswith("torch.export could not export") else "ERROR"
        print(f"RESULT {name} {kind_of} {type(e).__name__}: {str(e).splitlines()[0][:200]}", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="*", help="architectures (default: all; see --list)")
    ap.add_argument("--via", choices=("onnx", "torch"), default="onnx",
                    help="torch.onnx.export then ember.compile (default), or ember.from_torch")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per model (default 600)")
    ap.add_argument("--dynamic-hw", action="store_true",
                    help="image models only, exported with a dynamic height and width as well as batch, run "
                         "at three sizes (square, wide at batch 2, odd); the default list is then the image "
                         "models")
    ap.add_argument("--list", action="store_true", help="list the architectures and exit")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.list:
        for name, (kind, _) in ARCHS.items():
            print(f"{name:24s} {kind}")
        return 0
    if a.child:
        check_one(a.child, a.via, a.out, a.dynamic_hw)
        return 0
    names = a.models or [n for n, (k, _) in ARCHS.items() if not a.dynamic_hw or k.startswith("vision")]
    unknown = [n for n in names if n not in ARCHS]
    if unknown:
        ap.error(f"unknown architecture(s) {unknown}; --list shows them")
    if a.dynamic_hw and [n for n in names if not ARCHS[n][0].startswith("vision")]:
        ap.error(f"--dynamic-hw is for image models; not: "
                 f"{[n for n in names if not ARCHS[n][0].startswith('vision')]}")
    bad = 0
    with tempfile.TemporaryDirectory() as out:
        for name in names:
            cmd = [sys.executable, __file__, "--child", name, "--via", a.via, "--out", out] + \
                (["--dynamic-hw"] if a.dynamic_hw else [])
            try:
                p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout)
                lines = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
                if lines:
                    line = lines[-1][7:]
                else:  # a crash: the child's last words
                    line = f"{name} CRASH rc {p.returncode}: {(p.stderr.strip().splitlines() or [''])[-1][:200]}"
            except subprocess.TimeoutExpired:
                line = f"{name} TIMEOUT after {a.timeout:.0f} s"
            bad += not any(f" {s} " in f" {line} " for s in ("OK", "EXPORT"))
            print(line, flush=True)
    print(f"{len(names)} architecture(s), {bad} failing in Ember")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
