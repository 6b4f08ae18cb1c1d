"""PairRM's text to tokens: the prefix tokens, and the DeBERTa-v3 tokenizer with sentencepiece's own normaliser
(what transformers 4 gave it; transformers 5's NFC turns full-width letters and ligatures into [UNK])."""

from __future__ import annotations

from pathlib import Path

from sentencepiece import sentencepiece_model_pb2
from tokenizers import Regex, normalizers

from ..errors import ModelLoadError

PREFIX_TOKENS = SOURCE_PREFIX, CANDIDATE1_PREFIX, CANDIDATE2_PREFIX, CANDIDATE_PREFIX = (
    "<|source|>", "<|candidate1|>", "<|candidate2|>", "<|candidate|>")


def sentencepiece_normalizer(precompiled_charsmap: bytes):
    """The normaliser transformers 4 built for DeBERTa-v3 (DebertaV2Converter): sentencepiece's own table."""
    return normalizers.Sequence([normalizers.Strip(), normalizers.Precompiled(precompiled_charsmap),
                                 normalizers.Replace(Regex(" {2,}"), " ")])


def restore_sentencepiece_normalizer(tokenizer, folder: Path | None = None) -> bool:
    """Give a DeBERTa-v3 tokenizer back its spm.model normaliser; False where no spm.model is found."""
    candidates = [getattr(tokenizer, "vocab_file", None), folder and Path(folder) / "spm.model",
                  Path(str(getattr(tokenizer, "name_or_path", ""))) / "spm.model"]
    for spm in candidates:
        if spm and Path(spm).is_file():
            proto = sentencepiece_model_pb2.ModelProto()
            proto.ParseFromString(Path(spm).read_bytes())
            if charsmap := proto.normalizer_spec.precompiled_charsmap:
                tokenizer.backend_tokenizer.normalizer = sentencepiece_normalizer(charsmap)
                return True
    return False


def load_tokenizer(folder: Path, fallback: str | Path | None = None):
    """The checkpoint's tokenizer with the four prefix tokens and sentencepiece normalisation; (tokenizer, how)."""
    from transformers import AutoTokenizer  # keeps transformers off `repro score --help`

    source = folder if any((folder / f).is_file() for f in ("spm.model", "tokenizer.json")) else fallback
    if source is None:
        raise ModelLoadError(f"No tokenizer in {folder} (expected spm.model or tokenizer.json).")
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(source))
    except Exception as exc:
        raise ModelLoadError(f"The tokenizer of {source} could not be loaded ({type(exc).__name__}: {exc}). "
                             f"DeBERTa-v3 tokenizers need the sentencepiece and protobuf packages.") from None
    tokenizer.add_tokens([t for t in PREFIX_TOKENS if t not in tokenizer.get_vocab()])  # as llm-blender does
    tokenizer.model_max_length = int(1e30)  # truncation is ours, per prompt: silence length warnings
    how = "sentencepiece" if restore_sentencepiece_normalizer(tokenizer, Path(str(source))) else "nfkc"
    return tokenizer, how
