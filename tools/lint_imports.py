"""import-linter's `lint-imports` over the tokenledger package as the wheel lays it out (the contracts: pyproject.toml's
[tool.importlinter]; what `make test` runs).

    python -m tools.lint_imports [lint-imports options, e.g. --contract layers --verbose]

import-linter's graph (grimp) finds a package's modules by walking the package's folder, and two subpackages live
outside tokenledger/: tokenledger.assets in assets/ and tokenledger.pipelines in pipelines/ (pyproject.toml's
package-dir). Run from the checkout, `lint-imports` would not see them. So this lays out a temporary tree of symlinks
shaped as the installed package (tokenledger/ with every entry of tokenledger/, and assets and pipelines linked in
beside them, as package-dir maps them) and runs `lint-imports` from there, where `tokenledger` is that tree.
"""

from __future__ import annotations

import os
import sys
import tempfile
import tomllib
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[1]


def package_tree(into: Path, root: Path = PROJECT_ROOT) -> Path:
    """Symlinks under `into` laid out as the wheel's packages (pyproject.toml's package-dir); returns `into`."""
    mapping = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    for package, folder in sorted(mapping.items()):  # a package before its subpackages
        target = into.joinpath(*package.split("."))
        if target.parent != into:
            target.symlink_to(root / folder, target_is_directory=True)
            continue
        # The top package is a real folder, so that the subpackages mapped from elsewhere can sit in it.
        target.mkdir(parents=True)
        for entry in (root / folder).iterdir():
            if entry.name != "__pycache__":
                (target / entry.name).symlink_to(entry)
    return into


def main(argv: list[str]) -> None:
    from importlinter.cli import lint_imports_command

    with tempfile.TemporaryDirectory(prefix="tokenledger-layers-") as tmp:
        package_tree(Path(tmp))
        # lint-imports puts its working folder first on sys.path: from there, `tokenledger` is the tree.
        os.chdir(tmp)
        lint_imports_command.main(["--config", str(PROJECT_ROOT / "pyproject.toml"), "--no-cache", "--no-logo", *argv],
                                  prog_name="lint-imports")


if __name__ == "__main__":
    main(sys.argv[1:])
