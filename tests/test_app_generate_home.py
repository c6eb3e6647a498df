"""`personalq generate --home H` keeps everything it writes under H, its quantized UNet cache included.

It used to write the cache under $PERSONALQ_HOME (else repo_store/ in the source tree) whatever --home said.
"""

from __future__ import annotations

import shutil

from test_app_service import TINY_STEPS, app_assets  # noqa: F401


def test_generate_writes_its_quantized_cache_under_the_home_it_was_given(app_assets, personalq_home, tmp_path):  # noqa: F811
    from personalq.serving.cli import generate

    home = tmp_path / "given-home"
    shutil.copytree(app_assets["home"], home)
    out = tmp_path / "out.png"
    generate("a <dog-v1> on the beach", checkpoint="dog-v1", setting="W8A8", taq=True, seed=0, steps=TINY_STEPS,
             guidance=None, out=out, base_model=str(app_assets["base"]), single_file_config=None, device="cpu",
             dtype=None, home=home)
    assert out.exists()
    assert any((home / "quantized").rglob("*")), "the quantized cache is not under --home"
    assert not (personalq_home / "quantized").exists()  # $PERSONALQ_HOME is another directory here
