"""One process of the reopen tests: create and fill a collection, or reopen it; then retrieve.

    python reopen_process.py create|reopen URI COLLECTION [DB_NAME]

``create`` builds the collection from ``TEXTS`` with ``milvus_from_documents``;
``reopen`` opens it with ``existing_milvus_store``. Either then asks every
question of ``QUESTIONS`` through ``ThresholdedRetriever`` and prints, as JSON,
each question's kept ``[id, cosine]`` pairs. Run as a script, so that each mode
is a process of its own, as an indexing job and an application are.
"""

from __future__ import annotations

import json
import sys

from langchain_core.documents import Document

from langchain_thresholded import RetrievalPolicy, ThresholdedRetriever
from langchain_thresholded.embeddings import minilm_embeddings
from langchain_thresholded.milvus import existing_milvus_store, milvus_from_documents

TEXTS = {
    "refund-time": "Refunds are issued to the original payment method within 5 to 10 business "
    "days after we approve the request.",
    "refund-request": "You can request a refund within 30 days of purchase from the Billing "
    "page of your account.",
    "password-reset": "To reset your password, click 'Forgot password' on the sign-in page and "
    "follow the link we email you.",
    "invoices": "Invoices are emailed to the billing contact on the first day of each month "
    "and can be downloaded as PDF.",
}
QUESTIONS = [
    "How do I get my money back?",
    "I forgot my password",
    "What's the weather in Mumbai today?",
]
POLICY = RetrievalPolicy(min_similarity=0.3, top_k=3, max_per_source=None, max_chars=None)


def main(mode: str, uri: str, collection: str, db_name: str | None = None) -> None:
    embeddings = minilm_embeddings()
    if mode == "create":
        documents = [
            Document(id=doc_id, page_content=text, metadata={"source": doc_id})
            for doc_id, text in TEXTS.items()
        ]
        store = milvus_from_documents(
            documents,
            embeddings,
            uri=uri,
            collection_name=collection,
            db_name=db_name,
            consistency_level="Strong",
            overwrite=True,
        )
    elif mode == "reopen":
        store = existing_milvus_store(
            uri, collection, embeddings=embeddings, db_name=db_name, timeout=30.0
        )
    else:
        raise SystemExit(f"unknown mode {mode!r}: create or reopen")
    retriever = ThresholdedRetriever(vectorstore=store, policy=POLICY, neighbours=0)
    found = {
        question: [
            [doc.metadata["pk"], doc.metadata["similarity"]] for doc in retriever.invoke(question)
        ]
        for question in QUESTIONS
    }
    print(json.dumps(found))


if __name__ == "__main__":
    main(*sys.argv[1:])
