from langchain_palace import __all__

EXPECTED_ALL = [
    "LangChainEmbedder",
    "PalaceEmbeddings",
    "PalaceMemoryTool",
    "PalaceRetriever",
    "PalaceVectorStore",
]


def test_all_imports() -> None:
    assert sorted(EXPECTED_ALL) == sorted(__all__)
